// The fine-tuning tasks (task_datasets.h) as properties on a small corpus
// built here: rows start with bos and pad only after their content, labels are
// in range and mean what they say (a class index of the document's label; the
// span of the query entry's definition), every example keeps its document's
// split, the passage rule is followed exactly, and the same input gives the
// same output.
#include "posenc/text/task_datasets.h"

#include <algorithm>
#include <map>
#include <set>
#include <span>

#include "text_test_support.h"

namespace posenc::text {
namespace {

using test::expect_error;

// 64-bit FNV-1a, written here from its definition.
uint64_t fnv(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

constexpr const char* kWords[] = {"the",  "cat",   "sat",   "on",   "mat",   "dog",   "ran",    "over", "hill",
                                  "and",  "a",     "bird",  "sang", "in",    "tree",  "small",  "red",  "fox",
                                  "quick", "brown", "lazy", "river", "flows", "green", "valley", "sun",  "moon"};

// n words drawn by an LCG from kWords.
std::string words(uint64_t& state, int n) {
  std::string out;
  for (int k = 0; k < n; ++k) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    if (k > 0) out += ' ';
    out += kWords[(state >> 33) % std::size(kWords)];
  }
  return out;
}

Document wordnet_doc(int i, uint64_t& state) {
  static constexpr const char* kLex[] = {"noun.Tops", "noun.animal", "verb.motion", "adj.all", "adv.all"};
  static constexpr char kPos[] = {'n', 'n', 'v', 'a', 'r'};
  Document d;
  d.id = "wordnet:x" + std::to_string(i);
  d.source = "wordnet";
  d.label = kLex[i % 5];
  d.pos = kPos[i % 5];
  d.text = "w" + std::to_string(i % 7) + ": " + words(state, 3 + i % 90);  // some longer than 63 tokens
  d.split = split_of(d.id);
  return d;
}

// GCIDE-like entries: runs of senses of one headword (cat#1, cat#2), long
// headwords (over 8 tokens), long and short definitions, a text listed under
// another headword, and one with no definition at all.
Document gcide_doc(const std::string& headword, const std::string& text, Split split) {
  static std::map<std::string, int> seen;
  Document d;
  d.id = "gcide:" + lower(headword) + "#" + std::to_string(++seen[lower(headword)]);
  d.source = "gcide";
  d.label = headword;
  d.text = text;
  d.split = split;
  return d;
}

std::vector<Document> corpus() {
  uint64_t state = 7;
  std::vector<Document> docs;
  for (int i = 0; i < 400; ++i) docs.push_back(wordnet_doc(i, state));
  for (int i = 0; i < 240; ++i) {
    // Mostly long headwords, so that passages must lower the definition cap; the short ones come twice
    // (i and i + 4), so that a repeat meets its headword in the open passage.
    const std::string head = i % 4 != 0 ? words(state, 12) : std::string("h") + std::to_string(i / 8);
    const Split split = split_of(std::string("gcide:") + lower(head));  // as the corpus: one split per headword
    const std::string definition = std::string("n. ") + words(state, 2 + i % 40);
    if (i % 37 == 5) {
      docs.push_back(gcide_doc(head, std::string("other entry, n. ") + words(state, 5), split));  // no headword prefix
    } else if (i % 53 == 7) {
      docs.push_back(gcide_doc(head, head, split));  // nothing after the headword: unused
    } else {
      docs.push_back(gcide_doc(head, head + ", " + definition, split));
    }
  }
  for (int i = 0; i < 5; ++i) {
    Document d;
    d.id = "fortunes:x#" + std::to_string(i);
    d.source = "fortunes";
    d.text = words(state, 6);
    d.label = "x";
    docs.push_back(d);  // other sources are ignored by the tasks
  }
  return docs;
}

class TaskDatasets : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    docs_ = new std::vector<Document>(corpus());
    std::vector<std::string> texts;
    for (const Document& d : *docs_) texts.push_back(d.text);
    cache_ = new test::ScratchDir;
    TokenizerOptions o;
    o.vocab_size = 80;
    tokenizer_ = new Tokenizer(Tokenizer::train(texts, o, cache_->path()));
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete cache_;
    delete docs_;
  }
  static std::vector<Document>* docs_;
  static test::ScratchDir* cache_;
  static Tokenizer* tokenizer_;
};
std::vector<Document>* TaskDatasets::docs_ = nullptr;
test::ScratchDir* TaskDatasets::cache_ = nullptr;
Tokenizer* TaskDatasets::tokenizer_ = nullptr;

std::span<const int32_t> row_of(const TaskSplit& s, int64_t r, int64_t seq_len) {
  return std::span<const int32_t>(s.tokens).subspan(static_cast<size_t>(r * seq_len), static_cast<size_t>(seq_len));
}

// Content length: bos first, no pad inside the content, only pad after it.
size_t content_length(std::span<const int32_t> row) {
  EXPECT_EQ(row[0], kBosId);
  const size_t n = static_cast<size_t>(std::find(row.begin(), row.end(), kPadId) - row.begin());
  EXPECT_TRUE(std::all_of(row.begin() + static_cast<std::ptrdiff_t>(n), row.end(), [](int32_t t) { return t == kPadId; }));
  return n;
}

void check_classification(const TaskDataset& task, const std::vector<Document>& docs, const Tokenizer& tokenizer,
                          const std::function<std::string(const Document&)>& class_of) {
  ASSERT_EQ(task.kind, TaskKind::kClassification);
  ASSERT_EQ(task.documents_per_row, 1);
  EXPECT_TRUE(std::is_sorted(task.classes.begin(), task.classes.end()));
  EXPECT_EQ(std::set<std::string>(task.classes.begin(), task.classes.end()).size(), task.classes.size());
  std::vector<int> used(docs.size(), 0);
  std::set<int32_t> labels_seen;
  for (Split split : {Split::kTrain, Split::kValidation, Split::kTest}) {
    const TaskSplit& s = task.splits[static_cast<size_t>(split)];
    ASSERT_GT(s.rows, 0);
    ASSERT_EQ(s.tokens.size(), static_cast<size_t>(s.rows * task.seq_len));
    ASSERT_EQ(s.labels.size(), static_cast<size_t>(s.rows));
    ASSERT_EQ(s.documents.size(), static_cast<size_t>(s.rows));
    int64_t truncated = 0;
    for (int64_t r = 0; r < s.rows; ++r) {
      const Document& d = docs[static_cast<size_t>(s.documents[static_cast<size_t>(r)])];
      ++used[static_cast<size_t>(s.documents[static_cast<size_t>(r)])];
      EXPECT_EQ(d.source, "wordnet");
      EXPECT_EQ(d.split, split) << d.id;
      const int32_t label = s.labels[static_cast<size_t>(r)];
      ASSERT_GE(label, 0);
      ASSERT_LT(static_cast<size_t>(label), task.classes.size());
      EXPECT_EQ(task.classes[static_cast<size_t>(label)], class_of(d)) << d.id;
      labels_seen.insert(label);
      const std::span<const int32_t> row = row_of(s, r, task.seq_len);
      const size_t n = content_length(row);
      const std::vector<int32_t> ids = tokenizer.encode(d.text);
      const size_t kept = std::min(ids.size(), static_cast<size_t>(task.seq_len - 1));
      ASSERT_EQ(n, 1 + kept) << d.id;
      EXPECT_TRUE(std::equal(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(kept), row.begin() + 1)) << d.id;
      truncated += ids.size() > kept;
    }
    EXPECT_EQ(s.truncated, truncated);
  }
  // Every wordnet document is exactly one example; every class occurs.
  for (size_t i = 0; i < docs.size(); ++i) EXPECT_EQ(used[i], docs[i].source == "wordnet" ? 1 : 0) << docs[i].id;
  EXPECT_EQ(labels_seen.size(), task.classes.size());
}

TEST_F(TaskDatasets, LexnameRowsAndLabels) {
  const TaskDataset task = lexname_task(*docs_, *tokenizer_);
  EXPECT_EQ(task.name, "lexname");
  EXPECT_EQ(task.source, "wordnet");
  EXPECT_EQ(task.seq_len, 64);
  // Byte order: capitals first.
  EXPECT_EQ(task.classes, (std::vector<std::string>{"adj.all", "adv.all", "noun.Tops", "noun.animal", "verb.motion"}));
  check_classification(task, *docs_, *tokenizer_, [](const Document& d) { return d.label; });
  int64_t truncated = 0;
  for (const TaskSplit& s : task.splits) truncated += s.truncated;
  EXPECT_GT(truncated, 0);  // the fixture has glosses over 63 tokens: the cut is exercised
}

TEST_F(TaskDatasets, PosRowsAndLabels) {
  const TaskDataset task = pos_task(*docs_, *tokenizer_);
  EXPECT_EQ(task.classes, (std::vector<std::string>{"adjective", "adverb", "noun", "verb"}));
  const std::map<char, std::string> names = {{'a', "adjective"}, {'r', "adverb"}, {'n', "noun"}, {'v', "verb"}};
  check_classification(task, *docs_, *tokenizer_, [&](const Document& d) { return names.at(d.pos); });
  // Rows are lexname's rows: the task differs only in its labels.
  const TaskDataset lexname = lexname_task(*docs_, *tokenizer_);
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(task.splits[k].tokens, lexname.splits[k].tokens);
}

TEST_F(TaskDatasets, ShortRowsKeepOneToken) {
  ClassificationTaskOptions o;
  o.seq_len = 2;
  const TaskDataset task = lexname_task(*docs_, *tokenizer_, o);
  check_classification(task, *docs_, *tokenizer_, [](const Document& d) { return d.label; });
}

TEST(GcideDefinition, StripsTheLeadingHeadword) {
  EXPECT_EQ(gcide_definition("Cat, n. A small animal.", "cat"), "n. A small animal.");
  EXPECT_EQ(gcide_definition("Amyl alcohol Any of eight", "Amyl alcohol"), "Any of eight");
  EXPECT_EQ(gcide_definition("Cat,n.", "Cat"), "n.");
  EXPECT_EQ(gcide_definition("Cat", "Cat"), "");
  EXPECT_EQ(gcide_definition("Cattle, n. Beasts.", "Cat"), "Cattle, n. Beasts.");  // another word
  EXPECT_EQ(gcide_definition("Amyl alcohol Any of", "1-pentanol"), "Amyl alcohol Any of");
  EXPECT_EQ(gcide_definition("Ca", "Cat"), "Ca");
}

TEST(Fnv, KnownValues) {
  // FNV-1a 64 test vectors (Fowler, Noll, Vo: the offset basis for "", "a").
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("gcide:cat#1"), fnv("gcide:cat#1"));
}

TEST_F(TaskDatasets, DefinitionSpansPointAtTheQueryDefinition) {
  const DefinitionTaskOptions o;
  const TaskDataset task = definition_task(*docs_, *tokenizer_);
  EXPECT_EQ(task.kind, TaskKind::kSpan);
  EXPECT_TRUE(task.classes.empty());
  EXPECT_EQ(task.seq_len, 128);
  EXPECT_EQ(task.documents_per_row, 4);
  std::vector<int> used(docs_->size(), 0);
  int64_t truncated_total = 0;
  for (Split split : {Split::kTrain, Split::kValidation, Split::kTest}) {
    const TaskSplit& s = task.splits[static_cast<size_t>(split)];
    ASSERT_GT(s.rows, 0);
    ASSERT_EQ(s.tokens.size(), static_cast<size_t>(s.rows * 128));
    ASSERT_EQ(s.labels.size(), static_cast<size_t>(s.rows * 2));
    ASSERT_EQ(s.documents.size(), static_cast<size_t>(s.rows * 4));
    int64_t truncated = 0;
    for (int64_t r = 0; r < s.rows; ++r) {
      std::vector<const Document*> entries;
      std::set<std::string> heads;
      for (int k = 0; k < 4; ++k) {
        const int64_t i = s.documents[static_cast<size_t>(r * 4 + k)];
        ++used[static_cast<size_t>(i)];
        entries.push_back(&(*docs_)[static_cast<size_t>(i)]);
        EXPECT_EQ(entries.back()->source, "gcide");
        EXPECT_EQ(entries.back()->split, split) << entries.back()->id;
        heads.insert(lower(entries.back()->label));
      }
      EXPECT_EQ(heads.size(), 4u) << "headwords of a passage are distinct";
      const size_t query = fnv(entries[0]->id) % 4;
      const std::span<const int32_t> row = row_of(s, r, 128);
      const size_t n = content_length(row);
      const int32_t start = s.labels[static_cast<size_t>(2 * r)], end = s.labels[static_cast<size_t>(2 * r + 1)];
      ASSERT_LE(1, start);
      ASSERT_LE(start, end);
      ASSERT_LT(static_cast<size_t>(end), n);
      // The span is the start of the query entry's definition, at most 24 tokens.
      std::vector<int32_t> definition = tokenizer_->encode(gcide_definition(entries[query]->text, entries[query]->label));
      const size_t span = static_cast<size_t>(end - start + 1);
      ASSERT_LE(span, std::min<size_t>(definition.size(), 24));
      EXPECT_TRUE(std::equal(row.begin() + start, row.begin() + end + 1, definition.begin()));
      EXPECT_EQ(tokenizer_->decode(row.subspan(static_cast<size_t>(start), span)),
                tokenizer_->decode(std::span<const int32_t>(definition).first(span)));
      // The query headword follows bos, then sep, and stands right before the span in the passage.
      std::vector<int32_t> head = tokenizer_->encode(entries[query]->label);
      head.resize(std::min<size_t>(head.size(), 8));
      EXPECT_TRUE(std::equal(head.begin(), head.end(), row.begin() + 1));
      EXPECT_EQ(row[1 + head.size()], kSepId);
      // In the passage the query's headword and a sep stand right before the span, an eos right after it.
      EXPECT_EQ(row[start - 1], kSepId);
      EXPECT_TRUE(std::equal(head.begin(), head.end(), row.begin() + start - 1 - static_cast<std::ptrdiff_t>(head.size())));
      EXPECT_EQ(row[end + 1], kEosId);
      // The whole row from its documents: entries in order, each headword, sep, its definition cut at the
      // largest cap <= 24 that fits 128 tokens, eos.
      for (size_t cap = 24; cap >= 1; --cap) {
        std::vector<int32_t> expected = {kBosId};
        expected.insert(expected.end(), head.begin(), head.end());
        expected.push_back(kSepId);
        size_t expected_start = 0, expected_end = 0;
        for (size_t k = 0; k < 4; ++k) {
          std::vector<int32_t> h = tokenizer_->encode(entries[k]->label);
          h.resize(std::min<size_t>(h.size(), 8));
          std::vector<int32_t> d = tokenizer_->encode(gcide_definition(entries[k]->text, entries[k]->label));
          d.resize(std::min(d.size(), cap));
          expected.insert(expected.end(), h.begin(), h.end());
          expected.push_back(kSepId);
          if (k == query) expected_start = expected.size(), expected_end = expected.size() + d.size() - 1;
          expected.insert(expected.end(), d.begin(), d.end());
          expected.push_back(kEosId);
        }
        if (expected.size() > 128) continue;
        EXPECT_EQ(std::vector<int32_t>(row.begin(), row.begin() + static_cast<std::ptrdiff_t>(n)), expected);
        EXPECT_EQ(static_cast<size_t>(start), expected_start);
        EXPECT_EQ(static_cast<size_t>(end), expected_end);
        truncated += cap < 24;
        break;
      }
    }
    EXPECT_EQ(s.truncated, truncated);
    truncated_total += truncated;
    int64_t in_split = 0;
    for (const Document& d : *docs_) in_split += d.source == "gcide" && d.split == split;
    EXPECT_EQ(s.rows * 4 + s.unused_documents, in_split);
  }
  EXPECT_GT(truncated_total, 0);  // the fixture's long headwords make some passages lower the cap
  for (size_t i = 0; i < docs_->size(); ++i) {
    EXPECT_LE(used[i], 1) << (*docs_)[i].id;
    const Document& d = (*docs_)[i];
    if (d.source == "gcide" && d.text == d.label) {
      EXPECT_EQ(used[i], 0) << "no definition, no entry: " << d.id;
    }
  }
}

// The passage rule on headwords written out: a repeat waits for the next passage.
TEST_F(TaskDatasets, PassageRuleDefersRepeats) {
  std::vector<Document> docs;
  for (const char* h : {"sun", "moon", "Sun", "hill", "tree", "sun", "fox", "dog", "cat", "bird", "red"}) {
    docs.push_back(gcide_doc(h, std::string(h) + ", n. the " + h, Split::kTrain));
    docs.push_back(gcide_doc(h, std::string(h) + ", n. a " + h, Split::kValidation));
    docs.push_back(gcide_doc(h, std::string(h) + ", n. of " + h, Split::kTest));
  }
  const TaskDataset task = definition_task(docs, *tokenizer_);
  for (size_t split = 0; split < 3; ++split) {
    std::vector<std::string> order;
    for (int64_t i : task.splits[split].documents) order.push_back(docs[static_cast<size_t>(i)].label);
    // sun moon [Sun deferred] hill tree | Sun (deferred first) [sun deferred] fox dog cat | sun bird red + open.
    EXPECT_EQ(order, (std::vector<std::string>{"sun", "moon", "hill", "tree", "Sun", "fox", "dog", "cat"}));
    EXPECT_EQ(task.splits[split].unused_documents, 3);  // sun, bird, red: an open passage of 3
  }
}

TEST_F(TaskDatasets, SameInputSameOutput) {
  const std::vector<TaskDataset> a = task_datasets(*docs_, *tokenizer_, {"wordnet", "gcide", "fortunes"});
  const std::vector<TaskDataset> b = task_datasets(*docs_, *tokenizer_, {"wordnet", "gcide", "fortunes"});
  ASSERT_EQ(a.size(), 3u);
  for (size_t t = 0; t < a.size(); ++t) {
    EXPECT_EQ(a[t].name, (std::vector<std::string>{"lexname", "pos", "definition"})[t]);
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(a[t].splits[k].tokens, b[t].splits[k].tokens);
      EXPECT_EQ(a[t].splits[k].labels, b[t].splits[k].labels);
    }
  }
  // The set's pos (relabelled lexname rows) and definition are the tasks' own.
  const TaskDataset pos = pos_task(*docs_, *tokenizer_), definition = definition_task(*docs_, *tokenizer_);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(a[1].splits[k].tokens, pos.splits[k].tokens);
    EXPECT_EQ(a[1].splits[k].labels, pos.splits[k].labels);
    EXPECT_EQ(a[1].splits[k].documents, pos.splits[k].documents);
    EXPECT_EQ(a[1].splits[k].truncated, pos.splits[k].truncated);
    EXPECT_EQ(a[2].splits[k].tokens, definition.splits[k].tokens);
    EXPECT_EQ(a[2].splits[k].labels, definition.splits[k].labels);
  }
  EXPECT_EQ(a[1].classes, pos.classes);
  EXPECT_EQ(task_datasets(*docs_, *tokenizer_, {"gcide"}).size(), 1u);
  EXPECT_TRUE(task_datasets(*docs_, *tokenizer_, {"fortunes"}).empty());
}

TEST_F(TaskDatasets, Refusals) {
  uint64_t state = 3;
  std::vector<Document> one_class;
  for (int i = 0; i < 50; ++i) {
    one_class.push_back(wordnet_doc(i * 5, state));  // i * 5: always "noun.Tops", 'n'
  }
  expect_error<std::invalid_argument>([&] { lexname_task(one_class, *tokenizer_); },
                                      "[corpus] task 'lexname' needs documents of at least 2 classes, got 1 (noun.Tops)");
  expect_error<std::invalid_argument>([&] { pos_task(one_class, *tokenizer_); },
                                      "[corpus] task 'pos' needs documents of at least 2 classes, got 1 (noun)");
  expect_error<std::invalid_argument>([&] { lexname_task({}, *tokenizer_); },
                                      "[corpus] task 'lexname' needs documents of at least 2 classes, got 0");

  std::vector<Document> no_test;
  for (int i = 0; i < 40; ++i) {
    Document d = wordnet_doc(i, state);
    if (d.split == Split::kTest) d.split = Split::kTrain;
    no_test.push_back(d);
  }
  expect_error<std::invalid_argument>([&] { pos_task(no_test, *tokenizer_); },
                                      "[corpus] task 'pos' has no examples in split 'test' (0 wordnet documents there)");
  std::vector<Document> gcide;
  for (const char* h : {"sun", "moon", "sun", "hill", "tree"}) {
    for (Split s : {Split::kTrain, Split::kValidation, Split::kTest}) {
      gcide.push_back(gcide_doc(h, std::string(h) + ", n. the " + h, s));
    }
  }
  gcide.pop_back();  // the test split keeps 4 documents, two of them "sun": no passage
  expect_error<std::invalid_argument>(
      [&] { definition_task(gcide, *tokenizer_); },
      "[corpus] task 'definition' has no examples in split 'test' (4 gcide documents there; a passage needs 4 "
      "entries with distinct headwords)");
  Document odd = wordnet_doc(0, state);
  odd.pos = 's';
  no_test.push_back(odd);
  expect_error<std::invalid_argument>(
      [&] { pos_task(no_test, *tokenizer_); },
      "[corpus] task 'pos': document 'wordnet:x0' has part of speech 's', expected one of a, r, n, v");

  ClassificationTaskOptions c;
  c.seq_len = 1;
  expect_error<std::invalid_argument>([&] { lexname_task(*docs_, *tokenizer_, c); },
                                      "[corpus] task 'lexname': seq_len must be >= 2 (bos and a token), got 1");
  DefinitionTaskOptions o;
  o.seq_len = 53;
  expect_error<std::invalid_argument>(
      [&] { definition_task(*docs_, *tokenizer_, o); },
      "[corpus] task 'definition': seq_len must be >= 54 (bos, sep, the query and every entry with sep, one "
      "definition token and eos), got 53");
  o = {};
  o.entries = 1;
  expect_error<std::invalid_argument>([&] { definition_task(*docs_, *tokenizer_, o); },
                                      "[corpus] task 'definition': entries must be >= 2, got 1");
  o = {};
  o.headword_tokens = 0;
  expect_error<std::invalid_argument>([&] { definition_task(*docs_, *tokenizer_, o); },
                                      "[corpus] task 'definition': headword_tokens must be >= 1, got 0");
  o = {};
  o.definition_tokens = 0;
  expect_error<std::invalid_argument>([&] { definition_task(*docs_, *tokenizer_, o); },
                                      "[corpus] task 'definition': definition_tokens must be >= 1, got 0");
}

}  // namespace
}  // namespace posenc::text
