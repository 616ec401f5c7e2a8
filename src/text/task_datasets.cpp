#include "posenc/text/task_datasets.h"

#include <algorithm>
#include <deque>
#include <map>

#include "posenc/error.h"

namespace posenc::text {
namespace {

constexpr const char* kOp = "corpus";

char ascii_lower(char c) noexcept { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

std::string lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = ascii_lower(c);
  return out;
}

void require_rows(const TaskDataset& task, int64_t documents_in_split, Split split, std::string_view what) {
  if (task.splits[static_cast<size_t>(split)].rows > 0) return;
  fail_argument(kOp, "task '", task.name, "' has no examples in split '", split_name(split), "' (",
                documents_in_split, " ", task.source, " documents there", what, ")");
}

// [kBosId] + the text's tokens (at most seq_len - 1) + padding, one row per
// document of the source; labels from label_of (an index into classes).
template <class LabelOf>
void fill_classification(TaskDataset& task, const std::vector<Document>& documents, const Tokenizer& tokenizer,
                         LabelOf label_of) {
  const auto width = static_cast<size_t>(task.seq_len);
  std::array<int64_t, 3> documents_in_split{};
  for (size_t i = 0; i < documents.size(); ++i) {
    const Document& d = documents[i];
    if (d.source != task.source) continue;
    ++documents_in_split[static_cast<size_t>(d.split)];
    TaskSplit& s = task.splits[static_cast<size_t>(d.split)];
    const std::vector<int32_t> ids = tokenizer.encode(d.text);
    const size_t kept = std::min(ids.size(), width - 1);
    s.tokens.push_back(kBosId);
    s.tokens.insert(s.tokens.end(), ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(kept));
    s.tokens.insert(s.tokens.end(), width - 1 - kept, kPadId);
    s.labels.push_back(label_of(d));
    s.documents.push_back(static_cast<int64_t>(i));
    s.truncated += ids.size() > kept ? 1 : 0;
    ++s.rows;
  }
  for (Split split : {Split::kTrain, Split::kValidation, Split::kTest}) {
    require_rows(task, documents_in_split[static_cast<size_t>(split)], split, "");
  }
}

void check_classification(const ClassificationTaskOptions& options, std::string_view task) {
  require(options.seq_len >= 2, kOp, "task '", task, "': seq_len must be >= 2 (bos and a token), got ",
          options.seq_len);
}

// Refuses a task whose documents show fewer than 2 of its classes.
void require_two_classes(std::string_view task, const std::vector<std::string>& present) {
  if (present.size() >= 2) return;
  std::string names;
  for (const std::string& p : present) names += p;
  fail_argument(kOp, "task '", task, "' needs documents of at least 2 classes, got ", present.size(),
                names.empty() ? "" : " (", names, names.empty() ? "" : ")");
}

// A GCIDE entry prepared for passages.
struct Entry {
  int64_t document = 0;
  std::string key;  // lowercased headword
  std::vector<int32_t> headword;
  std::vector<int32_t> definition;  // at most definition_tokens
};

bool conflicts(const std::vector<Entry>& passage, const Entry& e) {
  return std::any_of(passage.begin(), passage.end(),
                     [&](const Entry& p) { return p.key == e.key || p.headword == e.headword; });
}

// Writes one passage's row and label into s.
void emit_passage(TaskSplit& s, const std::vector<Entry>& passage, const std::vector<Document>& documents,
                  const DefinitionTaskOptions& o) {
  const size_t query = fnv1a64(documents[static_cast<size_t>(passage.front().document)].id) % passage.size();
  const std::vector<int32_t>& q = passage[query].headword;
  // Lower the definition cap until the row fits; at cap 1 it always does (options checked).
  const auto row_length = [&](size_t cap) {
    size_t n = 2 + q.size();
    for (const Entry& e : passage) n += e.headword.size() + std::min(e.definition.size(), cap) + 2;
    return n;
  };
  size_t cap = static_cast<size_t>(o.definition_tokens);
  while (row_length(cap) > static_cast<size_t>(o.seq_len)) --cap;
  // cap + 1 did not fit, so some definition is cut below what the task keeps.
  s.truncated += cap < static_cast<size_t>(o.definition_tokens) ? 1 : 0;
  const size_t row_start = s.tokens.size();
  s.tokens.push_back(kBosId);
  s.tokens.insert(s.tokens.end(), q.begin(), q.end());
  s.tokens.push_back(kSepId);
  for (size_t k = 0; k < passage.size(); ++k) {
    const Entry& e = passage[k];
    // Delimited as a printed dictionary is: the span is then found by matching the query and by position,
    // not by guessing where a headword ends in running text.
    s.tokens.insert(s.tokens.end(), e.headword.begin(), e.headword.end());
    s.tokens.push_back(kSepId);
    const size_t kept = std::min(e.definition.size(), cap);
    if (k == query) {
      const auto start = static_cast<int32_t>(s.tokens.size() - row_start);
      s.labels.push_back(start);
      s.labels.push_back(start + static_cast<int32_t>(kept) - 1);
    }
    s.tokens.insert(s.tokens.end(), e.definition.begin(), e.definition.begin() + static_cast<std::ptrdiff_t>(kept));
    s.tokens.push_back(kEosId);
    s.documents.push_back(e.document);
  }
  s.tokens.resize(row_start + static_cast<size_t>(o.seq_len), kPadId);
  ++s.rows;
}

// The pos classes, in the order of their sorted names, and their WordNet tags.
constexpr std::string_view kPosTags = "arnv";

int32_t pos_label(const Document& d) { return static_cast<int32_t>(kPosTags.find(d.pos)); }

// The pos task checked and described, its splits still empty.
TaskDataset pos_task_without_rows(const std::vector<Document>& documents, const ClassificationTaskOptions& options) {
  check_classification(options, "pos");
  TaskDataset task;
  task.name = "pos";
  task.source = "wordnet";
  task.description = "WordNet gloss -> its part of speech";
  task.seq_len = options.seq_len;
  task.classes = {"adjective", "adverb", "noun", "verb"};
  std::array<bool, 4> present{};
  for (const Document& d : documents) {
    if (d.source != task.source) continue;
    const size_t k = kPosTags.find(d.pos);
    require(d.pos != 0 && k != std::string_view::npos, kOp, "task 'pos': document '", d.id,
            "' has part of speech '", std::string(1, d.pos), "', expected one of a, r, n, v");
    present[k] = true;
  }
  std::vector<std::string> seen;
  for (size_t k = 0; k < 4; ++k) {
    if (present[k]) seen.push_back(task.classes[k]);
  }
  require_two_classes(task.name, seen);
  return task;
}

}  // namespace

std::string_view task_kind_name(TaskKind kind) noexcept {
  return kind == TaskKind::kSpan ? "span" : "classification";
}

uint64_t fnv1a64(std::string_view bytes) noexcept {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

std::string_view gcide_definition(std::string_view text, std::string_view headword) noexcept {
  if (headword.empty() || text.size() < headword.size()) return text;
  for (size_t i = 0; i < headword.size(); ++i) {
    if (ascii_lower(text[i]) != ascii_lower(headword[i])) return text;
  }
  std::string_view rest = text.substr(headword.size());
  // "Cat, n. ..." has the headword; "Cattle, n. ..." does not have "Cat".
  if (!rest.empty() && rest.front() != ',' && rest.front() != ' ') return text;
  if (!rest.empty() && rest.front() == ',') rest.remove_prefix(1);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  return rest;
}

TaskDataset lexname_task(const std::vector<Document>& documents, const Tokenizer& tokenizer,
                         const ClassificationTaskOptions& options) {
  check_classification(options, "lexname");
  TaskDataset task;
  task.name = "lexname";
  task.source = "wordnet";
  task.description = "WordNet gloss -> its lexicographer file";
  task.seq_len = options.seq_len;
  for (const Document& d : documents) {
    if (d.source == task.source) task.classes.push_back(d.label);
  }
  std::sort(task.classes.begin(), task.classes.end());
  task.classes.erase(std::unique(task.classes.begin(), task.classes.end()), task.classes.end());
  require_two_classes(task.name, task.classes);
  fill_classification(task, documents, tokenizer, [&](const Document& d) {
    return static_cast<int32_t>(std::lower_bound(task.classes.begin(), task.classes.end(), d.label) -
                                task.classes.begin());
  });
  return task;
}

TaskDataset pos_task(const std::vector<Document>& documents, const Tokenizer& tokenizer,
                     const ClassificationTaskOptions& options) {
  TaskDataset task = pos_task_without_rows(documents, options);
  fill_classification(task, documents, tokenizer, pos_label);
  return task;
}

TaskDataset definition_task(const std::vector<Document>& documents, const Tokenizer& tokenizer,
                            const DefinitionTaskOptions& o) {
  require(o.entries >= 2, kOp, "task 'definition': entries must be >= 2, got ", o.entries);
  require(o.headword_tokens >= 1, kOp, "task 'definition': headword_tokens must be >= 1, got ", o.headword_tokens);
  require(o.definition_tokens >= 1, kOp, "task 'definition': definition_tokens must be >= 1, got ",
          o.definition_tokens);
  const int64_t least = 2 + o.headword_tokens + o.entries * (o.headword_tokens + 3);
  require(o.seq_len >= least, kOp, "task 'definition': seq_len must be >= ", least,
          " (bos, sep, the query and every entry with sep, one definition token and eos), got ", o.seq_len);
  TaskDataset task;
  task.name = "definition";
  task.kind = TaskKind::kSpan;
  task.source = "gcide";
  task.description = "GCIDE passage of 4 entries and a query headword -> the span of its definition";
  task.seq_len = o.seq_len;
  task.documents_per_row = o.entries;

  std::array<std::vector<Entry>, 3> passage;  // open passage per split
  std::array<std::deque<Entry>, 3> deferred;
  std::array<int64_t, 3> documents_in_split{};
  const auto entries = static_cast<size_t>(o.entries);
  // Emits the full passage, then seeds the next one from the deferred entries.
  const auto settle = [&](size_t split) {
    while (passage[split].size() == entries) {
      emit_passage(task.splits[split], passage[split], documents, o);
      passage[split].clear();
      std::deque<Entry> still;
      for (Entry& e : deferred[split]) {
        if (passage[split].size() < entries && !conflicts(passage[split], e)) {
          passage[split].push_back(std::move(e));
        } else {
          still.push_back(std::move(e));
        }
      }
      deferred[split] = std::move(still);
    }
  };
  for (size_t i = 0; i < documents.size(); ++i) {
    const Document& d = documents[i];
    if (d.source != task.source) continue;
    const auto split = static_cast<size_t>(d.split);
    ++documents_in_split[split];
    Entry e;
    e.document = static_cast<int64_t>(i);
    e.key = lowercase(d.label);
    e.headword = tokenizer.encode(d.label);
    if (e.headword.size() > static_cast<size_t>(o.headword_tokens)) {
      e.headword.resize(static_cast<size_t>(o.headword_tokens));
    }
    e.definition = tokenizer.encode(gcide_definition(d.text, d.label));
    if (e.definition.size() > static_cast<size_t>(o.definition_tokens)) {
      e.definition.resize(static_cast<size_t>(o.definition_tokens));
    }
    if (e.headword.empty() || e.definition.empty()) continue;  // nothing to ask or to point at
    if (conflicts(passage[split], e)) {
      deferred[split].push_back(std::move(e));
    } else {
      passage[split].push_back(std::move(e));
      settle(split);
    }
  }
  for (Split split : {Split::kTrain, Split::kValidation, Split::kTest}) {
    TaskSplit& s = task.splits[static_cast<size_t>(split)];
    s.unused_documents = documents_in_split[static_cast<size_t>(split)] - s.rows * o.entries;
    require_rows(task, documents_in_split[static_cast<size_t>(split)], split,
                 "; a passage needs " + std::to_string(o.entries) + " entries with distinct headwords");
  }
  return task;
}

std::vector<TaskDataset> task_datasets(const std::vector<Document>& documents, const Tokenizer& tokenizer,
                                       const std::vector<std::string>& sources) {
  const auto has = [&](std::string_view s) { return std::find(sources.begin(), sources.end(), s) != sources.end(); };
  std::vector<TaskDataset> tasks;
  if (has("wordnet")) {
    tasks.push_back(lexname_task(documents, tokenizer));
    // pos has lexname's rows: relabel them instead of encoding every gloss again.
    TaskDataset pos = pos_task_without_rows(documents, {});
    for (size_t k = 0; k < 3; ++k) {
      const TaskSplit& rows = tasks.back().splits[k];
      TaskSplit& s = pos.splits[k];
      s.rows = rows.rows;
      s.tokens = rows.tokens;
      s.documents = rows.documents;
      s.truncated = rows.truncated;
      for (int64_t i : rows.documents) s.labels.push_back(pos_label(documents[static_cast<size_t>(i)]));
    }
    tasks.push_back(std::move(pos));
  }
  if (has("gcide")) tasks.push_back(definition_task(documents, tokenizer));
  return tasks;
}

}  // namespace posenc::text
