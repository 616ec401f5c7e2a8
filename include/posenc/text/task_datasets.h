// Labelled fine-tuning datasets built from the corpus (the "properties" suite
// of issue 16 §2): pure functions from documents and a tokenizer to rows and
// labels in memory; apps/posenc_text writes them as .npy files.
//
// Every example keeps its document's split (Document::split, the LM data's
// split), so a test example's text is never seen in pretraining.
//
//   lexname     wordnet   row = [kBosId] + encode(text)[:T-1], pad kPadId;
//                         label = index of the lexicographer file in `classes`
//                         (those present in the documents, all splits, sorted
//                         by byte value). T = 64.
//   pos         wordnet   same rows; label = index in {adjective, adverb,
//                         noun, verb} ('a', 'r', 'n', 'v').
//   definition  gcide     span extraction, T = 128, passages of 4 entries:
//                         row = [kBosId] + query headword + [kSepId] + entry_1
//                         + ... + entry_4, pad; entry = headword tokens (at most
//                         8) + [kSepId] + definition tokens (at most 24, fewer
//                         when the row would not fit T) + [kEosId];
//                         label = (start, end), the
//                         inclusive positions of the query entry's definition.
//
// Passages of one split (exact rule, definition_task): documents are taken in
// corpus order; an entry joins the open passage unless its lowercased (ASCII)
// headword or its headword tokens equal an entry's already there, in which
// case it is deferred. When the passage holds 4 entries it is emitted and the
// next one starts with the deferred entries, oldest first, each joining if it
// can (else it stays deferred). At the end of the split, the open passage
// (fewer than 4 entries) and what is still deferred are unused. A document
// whose headword or definition has no token is unused too. The query entry is
// number fnv1a64(first entry's document id) mod 4 (0-based, row order).
//
// Definition = the cleaned text without its leading headword: if the text
// starts with the headword (ASCII case-insensitive) followed by the end, ','
// or a space, that prefix, one ',' and the spaces after it are removed;
// otherwise (GCIDE lists some texts under another headword) the whole text.
//
// Errors: std::invalid_argument "[corpus] task 'NAME' ...", e.g.
//   "[corpus] task 'lexname' has no examples in split 'test' (0 wordnet documents there)"
//   "[corpus] task 'pos' needs documents of at least 2 classes, got 1 (noun)"
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/text/corpus.h"
#include "posenc/text/tokenizer.h"

namespace posenc::text {

enum class TaskKind { kClassification, kSpan };
std::string_view task_kind_name(TaskKind kind) noexcept;  // "classification", "span"

// One split of a task. tokens: [rows, seq_len] int32, C order, each row
// content then kPadId. labels: [rows] (classification) or [rows, 2] (span:
// start, end; inclusive positions in the row).
struct TaskSplit {
  int64_t rows = 0;
  std::vector<int32_t> tokens;
  std::vector<int32_t> labels;
  // Per row, the indices into the input documents it was made from, [rows, k]:
  // k = 1 (classification) or the passage's entries in row order (span).
  std::vector<int64_t> documents;
  int64_t truncated = 0;         // rows whose content was cut to fit seq_len
  int64_t unused_documents = 0;  // span only: documents of the split in no passage
};

struct TaskDataset {
  std::string name;  // "lexname", "pos", "definition"
  TaskKind kind = TaskKind::kClassification;
  std::string source;  // the corpus source the documents come from
  std::string description;
  int64_t seq_len = 0;
  int64_t documents_per_row = 1;     // k of TaskSplit::documents
  std::vector<std::string> classes;  // classification only
  std::array<TaskSplit, 3> splits;   // indexed by Split
};

struct ClassificationTaskOptions {
  int64_t seq_len = 64;  // >= 2: bos and one token
};

struct DefinitionTaskOptions {
  int64_t seq_len = 128;
  int64_t entries = 4;             // >= 2 per passage
  int64_t headword_tokens = 8;     // >= 1
  int64_t definition_tokens = 24;  // >= 1; lowered for a passage that would not fit seq_len
  // seq_len must hold 2 + headword_tokens + entries * (headword_tokens + 3),
  // so that every passage fits with its delimiters and one definition token per entry.
};

// The tasks, from the documents of their source (others are ignored).
TaskDataset lexname_task(const std::vector<Document>& documents, const Tokenizer& tokenizer,
                         const ClassificationTaskOptions& options = {});
TaskDataset pos_task(const std::vector<Document>& documents, const Tokenizer& tokenizer,
                     const ClassificationTaskOptions& options = {});
TaskDataset definition_task(const std::vector<Document>& documents, const Tokenizer& tokenizer,
                            const DefinitionTaskOptions& options = {});

// Every task whose source is among `sources`, in the order lexname, pos, definition.
std::vector<TaskDataset> task_datasets(const std::vector<Document>& documents, const Tokenizer& tokenizer,
                                       const std::vector<std::string>& sources);

// The definition of a GCIDE entry (see above), and the hash that picks a passage's query.
std::string_view gcide_definition(std::string_view text, std::string_view headword) noexcept;
uint64_t fnv1a64(std::string_view bytes) noexcept;

}  // namespace posenc::text
