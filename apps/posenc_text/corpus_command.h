// `posenc corpus [--sources wordnet,gcide,fortunes] [--vocab-size N]
// [--model-type unigram|bpe] [--cache DIR] [--root DIR] [--out DIR] [--json]`:
// the experiments' English corpus (Debian packages), its deterministic split
// and size; with --vocab-size, the SentencePiece model trained on the training
// split (cached in --cache, reused when present) and the tokens per split;
// with --out, the token ids of each split for training (posenc train --task
// text --data DIR), since a torch process cannot load SentencePiece, and the
// labelled fine-tuning tasks of the sources (DIR/tasks/NAME, task_files.h).
#pragma once

#include <CLI/CLI.hpp>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "posenc/text/corpus.h"
#include "posenc/text/task_datasets.h"
#include "posenc/text/tokenizer.h"

namespace posenc::cli {

class CorpusCommand {
 public:
  explicit CorpusCommand(CLI::App& parent);
  CorpusCommand(const CorpusCommand&) = delete;  // CLI11 holds pointers to the members
  CorpusCommand& operator=(const CorpusCommand&) = delete;

  bool selected() const { return app_->parsed(); }
  void run() const;

 private:
  void write_dataset(const text::Tokenizer& tokenizer, const text::CorpusStats& stats,
                     const std::vector<std::array<int64_t, 3>>& tokens,
                     const std::array<std::vector<int64_t>, 3>& ids,
                     const std::vector<text::TaskDataset>& tasks) const;

  CLI::App* app_;
  std::vector<std::string> sources_ = {"wordnet", "gcide", "fortunes"};
  int64_t vocab_size_ = 0;
  int64_t tokenizer_texts_ = 0;
  std::string model_type_ = "unigram";
  std::string cache_ = "out/tokenizer";
  std::string root_ = "/";
  std::string out_;
  bool json_ = false;
};

}  // namespace posenc::cli
