#include "corpus_command.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <filesystem>
#include <cstdio>
#include <iostream>
#include <stdexcept>
#include <system_error>

#include "posenc/io/atomic_file.h"
#include "posenc/io/npy.h"
#include "posenc/text/corpus.h"
#include "posenc/text/task_datasets.h"
#include "posenc/text/tokenizer.h"
#include "task_files.h"

namespace posenc::cli {

CorpusCommand::CorpusCommand(CLI::App& parent) {
  app_ = parent.add_subcommand(
      "corpus",
      "The experiments' English corpus (WordNet glosses, GCIDE entries, fortunes; Debian packages): documents, "
      "bytes and words per split; with --vocab-size, the SentencePiece tokenizer trained on the training split "
      "(cached) and tokens per split. docs/experiments.md");
  app_->add_option("--sources", sources_, "Comma-separated: wordnet, gcide, fortunes")
      ->delimiter(',')
      ->capture_default_str();
  app_->add_option("--vocab-size", vocab_size_, "Train (or reuse) a SentencePiece model of this size and count tokens");
  app_->add_option("--model-type", model_type_, "unigram | bpe")->capture_default_str();
  app_->add_option("--tokenizer-texts", tokenizer_texts_,
                   "Train the tokenizer on every k-th training text, at most this many (0: all of them)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app_->add_option("--cache", cache_, "Where tokenizer models are cached")->capture_default_str();
  app_->add_option("--root", root_, "Read the packages' files under this directory instead of / (a copy, a test tree)")
      ->capture_default_str();
  app_->add_option("--out", out_,
                   "With --vocab-size: write DIR/{train,validation,test}.ids.npy (int64 token ids, each document "
                   "followed by eos = 3), DIR/tokenizer.model and DIR/corpus.json, for posenc train --task text; and "
                   "the fine-tuning tasks of the sources (wordnet: lexname, pos; gcide: definition) as "
                   "DIR/tasks/NAME/{train,validation,test}.{tokens,labels}.npy (int32) and task.json");
  app_->add_flag("--json", json_, "One JSON object");
}

// DIR/corpus.json last: a directory with it is complete (each file is written
// atomically; an old corpus.json goes first, so a rerun stopped half-way does
// not look complete).
void CorpusCommand::write_dataset(const text::Tokenizer& tokenizer, const text::CorpusStats& stats,
                                  const std::vector<std::array<int64_t, 3>>& tokens,
                                  const std::array<std::vector<int64_t>, 3>& ids,
                                  const std::vector<text::TaskDataset>& tasks) const {
  const std::filesystem::path dir = out_;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error("[corpus] " + out_ + ": cannot create the directory: " + ec.message());
  std::filesystem::remove(dir / "corpus.json", ec);
  if (ec) throw std::runtime_error("[corpus] " + out_ + "/corpus.json: cannot remove: " + ec.message());
  nlohmann::ordered_json splits;
  for (int split = 0; split < 3; ++split) {
    const std::string name(text::split_name(static_cast<text::Split>(split)));
    const std::vector<int64_t>& values = ids[static_cast<size_t>(split)];
    io::write_npy((dir / (name + ".ids.npy")).string(), values, {static_cast<int64_t>(values.size())});
    splits[name] = static_cast<int64_t>(values.size());
  }
  io::write_file_atomically("corpus", (dir / "tokenizer.model").string(),
                            io::read_regular_file("corpus", tokenizer.model_file().string()));
  std::vector<std::string> task_names;
  for (const text::TaskDataset& task : tasks) {
    write_task_files(dir / "tasks" / task.name, task);
    task_names.push_back(task.name);
  }
  nlohmann::ordered_json j;
  j["format"] = "posenc-text-ids-1";
  j["vocab_size"] = tokenizer.vocab_size();
  j["model_type"] = model_type_;
  j["eos_id"] = text::kEosId;
  j["sources"] = stats.sources;
  j["tokens"] = splits;  // per split, eos separators included
  nlohmann::ordered_json per_source;
  for (size_t i = 0; i < stats.sources.size(); ++i) {
    per_source[stats.sources[i]] = {{"train", tokens[i][0]}, {"validation", tokens[i][1]}, {"test", tokens[i][2]}};
  }
  j["tokens_per_source"] = per_source;
  j["tasks"] = task_names;  // DIR/tasks/NAME, each with its task.json
  io::write_file_atomically("corpus", (dir / "corpus.json").string(), j.dump(2) + "\n");
}

void CorpusCommand::run() const {
  text::CorpusOptions options;
  options.sources = sources_;
  const std::filesystem::path root = root_;
  for (std::filesystem::path* p :
       {&options.wordnet_dir, &options.gcide_index, &options.gcide_dict, &options.fortunes_dir}) {
    *p = root / p->relative_path();
  }
  const std::vector<text::Document> docs = text::load_corpus(options);
  const text::CorpusStats stats = text::corpus_stats(docs);

  // Tokens per [source][split], when a tokenizer is asked for.
  std::vector<std::array<int64_t, 3>> tokens(stats.sources.size(), {0, 0, 0});
  std::string model_file;
  bool cached = false;
  double seconds = 0;
  if (!out_.empty() && app_->count("--vocab-size") == 0) {
    throw std::invalid_argument("[corpus] --out needs --vocab-size (the token ids come from that tokenizer)");
  }
  std::array<std::vector<int64_t>, 3> ids;  // per split, for --out
  std::vector<text::TaskDataset> tasks;      // for --out
  if (vocab_size_ > 0 || app_->count("--vocab-size") > 0) {
    text::TokenizerOptions t;
    t.vocab_size = vocab_size_;
    t.model_type = model_type_;
    std::vector<std::string> train;
    for (const text::Document& d : docs) {
      if (d.split == text::Split::kTrain) train.push_back(d.text);
    }
    if (tokenizer_texts_ > 0 && static_cast<int64_t>(train.size()) > tokenizer_texts_) {
      // Every k-th text: a deterministic sample spread over every source, for a faster (quick) tokenizer.
      const size_t k = (train.size() + static_cast<size_t>(tokenizer_texts_) - 1) / static_cast<size_t>(tokenizer_texts_);
      std::vector<std::string> sample;
      for (size_t i = 0; i < train.size(); i += k) sample.push_back(std::move(train[i]));
      train = std::move(sample);
    }
    const auto start = std::chrono::steady_clock::now();
    const text::Tokenizer tokenizer = text::Tokenizer::train(train, t, cache_);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    model_file = tokenizer.model_file().string();
    cached = tokenizer.loaded_from_cache();
    for (const text::Document& d : docs) {
      const size_t k = static_cast<size_t>(
          std::find(stats.sources.begin(), stats.sources.end(), d.source) - stats.sources.begin());
      const std::vector<int32_t> encoded = tokenizer.encode(d.text);
      tokens[k][static_cast<size_t>(d.split)] += static_cast<int64_t>(encoded.size());
      if (!out_.empty()) {
        std::vector<int64_t>& split = ids[static_cast<size_t>(d.split)];
        split.insert(split.end(), encoded.begin(), encoded.end());
        split.push_back(text::kEosId);
      }
    }
    if (!out_.empty()) {
      // Built before any file is written: a task refused (too few classes, an empty split) writes nothing.
      tasks = text::task_datasets(docs, tokenizer, stats.sources);
      write_dataset(tokenizer, stats, tokens, ids, tasks);
    }
  }

  if (json_) {
    nlohmann::ordered_json j;
    j["sources"] = nlohmann::ordered_json::array();
    for (size_t i = 0; i < stats.sources.size(); ++i) {
      nlohmann::ordered_json s;
      s["source"] = stats.sources[i];
      for (int split = 0; split < 3; ++split) {
        const text::SplitStats& x = stats.splits[i][static_cast<size_t>(split)];
        nlohmann::ordered_json part = {{"documents", x.documents}, {"bytes", x.bytes}, {"words", x.words}};
        if (!model_file.empty()) part["tokens"] = tokens[i][static_cast<size_t>(split)];
        s[std::string(text::split_name(static_cast<text::Split>(split)))] = part;
      }
      j["sources"].push_back(s);
    }
    if (!model_file.empty()) {
      j["tokenizer"] = {{"model", model_file}, {"vocab_size", vocab_size_}, {"model_type", model_type_},
                        {"cached", cached}};
    }
    if (!out_.empty()) {
      nlohmann::ordered_json t = nlohmann::ordered_json::object();
      for (const text::TaskDataset& task : tasks) {
        t[task.name] = {{"train", task.splits[0].rows}, {"validation", task.splits[1].rows},
                        {"test", task.splits[2].rows}};
      }
      j["tasks"] = t;  // examples per split
    }
    std::cout << j.dump(2) << '\n';
    return;
  }
  std::printf("%-9s %-10s %10s %12s %11s%s\n", "source", "split", "documents", "bytes", "words",
              model_file.empty() ? "" : "      tokens");
  for (size_t i = 0; i < stats.sources.size(); ++i) {
    for (int split = 0; split < 3; ++split) {
      const text::SplitStats& x = stats.splits[i][static_cast<size_t>(split)];
      std::printf("%-9s %-10s %10lld %12lld %11lld", stats.sources[i].c_str(),
                  std::string(text::split_name(static_cast<text::Split>(split))).c_str(),
                  static_cast<long long>(x.documents), static_cast<long long>(x.bytes),
                  static_cast<long long>(x.words));
      if (!model_file.empty()) std::printf(" %11lld", static_cast<long long>(tokens[i][static_cast<size_t>(split)]));
      std::printf("\n");
    }
  }
  if (!model_file.empty()) {
    std::printf("tokenizer %s (%s, vocabulary %lld): %s in %.1f s\n", model_file.c_str(), model_type_.c_str(),
                static_cast<long long>(vocab_size_), cached ? "reused from the cache" : "trained", seconds);
  }
  for (const text::TaskDataset& task : tasks) {
    std::printf("task %s (%s, seq_len %lld): %lld / %lld / %lld examples -> %s\n", task.name.c_str(),
                std::string(text::task_kind_name(task.kind)).c_str(), static_cast<long long>(task.seq_len),
                static_cast<long long>(task.splits[0].rows), static_cast<long long>(task.splits[1].rows),
                static_cast<long long>(task.splits[2].rows),
                (std::filesystem::path(out_) / "tasks" / task.name).c_str());
  }
}

}  // namespace posenc::cli
