#include "corpus_command.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <filesystem>
#include <cstdio>
#include <iostream>

#include "posenc/text/corpus.h"
#include "posenc/text/tokenizer.h"

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
  app_->add_option("--cache", cache_, "Where tokenizer models are cached")->capture_default_str();
  app_->add_option("--root", root_, "Read the packages' files under this directory instead of / (a copy, a test tree)")
      ->capture_default_str();
  app_->add_flag("--json", json_, "One JSON object");
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
  if (vocab_size_ > 0 || app_->count("--vocab-size") > 0) {
    text::TokenizerOptions t;
    t.vocab_size = vocab_size_;
    t.model_type = model_type_;
    std::vector<std::string> train;
    for (const text::Document& d : docs) {
      if (d.split == text::Split::kTrain) train.push_back(d.text);
    }
    const auto start = std::chrono::steady_clock::now();
    const text::Tokenizer tokenizer = text::Tokenizer::train(train, t, cache_);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    model_file = tokenizer.model_file().string();
    cached = tokenizer.loaded_from_cache();
    for (const text::Document& d : docs) {
      const size_t k = static_cast<size_t>(
          std::find(stats.sources.begin(), stats.sources.end(), d.source) - stats.sources.begin());
      tokens[k][static_cast<size_t>(d.split)] += static_cast<int64_t>(tokenizer.encode(d.text).size());
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
}

}  // namespace posenc::cli
