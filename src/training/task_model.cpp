// TaskModel: the task's encoder or decoder, its score, and fine-tuning's
// initialisation from a pretrained run.
#include <ATen/core/grad_mode.h>
#include <torch/utils.h>

#include <string>
#include <string_view>

#include "posenc/error.h"
#include "posenc/training/trainer.h"

namespace posenc::nn {
namespace {

// The heads are the task's own: everything else is the body that fine-tuning inherits.
bool is_head(std::string_view name) {
  for (const std::string_view head : {"cls_head.", "span_head.", "mlm_head.", "lm_head."}) {
    if (name.starts_with(head)) return true;
  }
  return false;
}

}  // namespace

TaskModel::TaskModel(const Task& task, const TrainConfig& resolved) : task_(task) {
  TransformerOptions options(task.vocab_size(), resolved.encoding);
  options.dim(resolved.dim)
      .layers(resolved.layers)
      .heads(resolved.heads)
      .dropout(resolved.dropout)
      // "fused" is the automatic choice: fused, composed only where attention dropout needs it.
      .attention_path(resolved.attention == "composed" ? AttentionPath::kComposed : AttentionPath::kAuto)
      .max_positions(resolved.max_positions)
      .num_classes(task.kind() == TaskKind::kTextClassify ? task.num_classes() : 2)
      .masked_lm_head(task.kind() == TaskKind::kMaskedLm)
      .random_positions(resolved.random_positions)
      .layer_encodings(layer_encoding_list(resolved))
      .encoding_config(resolved.encoding_config);
  if (task.model() == ModelKind::kEncoder) {
    encoder_ = TransformerEncoder(options);
  } else {
    decoder_ = TransformerDecoder(options);
  }
}

at::Tensor TaskModel::first_layer_attention(const at::Tensor& tokens) {
  if (encoder_) return encoder_->first_layer_attention(tokens);
  return decoder_->first_layer_attention(tokens);
}

torch::nn::Module& TaskModel::module() {
  if (encoder_) return *encoder_;
  return *decoder_;
}

TaskScore TaskModel::score(const Batch& batch, const at::Tensor& positions) {
  switch (task_.kind()) {
    case TaskKind::kOrder:
    case TaskKind::kTextClassify:
      return task_.score_classification(encoder_->classify(batch.tokens, batch.key_padding_mask, positions), batch);
    case TaskKind::kSpan:
    case TaskKind::kTextSpan: {
      const auto [start, end] = encoder_->span(batch.tokens, batch.key_padding_mask, positions);
      return task_.score_span(start, end, batch);
    }
    case TaskKind::kMaskedLm: {
      const at::Tensor hidden = encoder_->forward(batch.tokens, batch.key_padding_mask, positions);
      return task_.score_head(hidden, encoder_->mlm_head->weight, encoder_->mlm_head->bias, batch);
    }
    case TaskKind::kLookback:
    case TaskKind::kCopy:
    case TaskKind::kText: break;
  }
  const at::Tensor hidden = decoder_->hidden(batch.tokens, positions);
  return task_.score_head(hidden, decoder_->lm_head->weight, decoder_->lm_head->bias, batch);
}

void initialize_from(TaskModel& model, const TrainConfig& config, const std::filesystem::path& source) {
  LoadedRun loaded;
  TaskModel pretrained = load_task_model(source, &loaded);
  const TrainConfig& p = loaded.config;
  const Task& task = model.task();
  require(task.model() == pretrained.task().model(), "train", "init_from needs a run with the same model (",
          task.model() == ModelKind::kEncoder ? "encoder" : "decoder", "), ", source.string(), " trained a ",
          pretrained.task().model() == ModelKind::kEncoder ? "encoder" : "decoder");
  const auto same = [&](const char* field, const auto& theirs, const auto& ours) {
    require(theirs == ours, "train", "init_from: ", source.string(), " has ", field, " ", theirs, ", this run ", ours);
  };
  same("encoding", p.encoding, config.encoding);
  same("vocab_size", p.task_options.vocab_size, config.task_options.vocab_size);
  same("dim", p.dim, config.dim);
  same("layers", p.layers, config.layers);
  same("heads", p.heads, config.heads);
  same("max_positions", p.max_positions, config.max_positions);
  const auto theirs = pretrained.module().named_parameters(/*recurse=*/true);
  const auto their_buffers = pretrained.module().named_buffers(/*recurse=*/true);
  torch::NoGradGuard no_grad;
  for (auto& item : model.module().named_parameters(/*recurse=*/true)) {
    if (is_head(item.key())) continue;
    const at::Tensor* from = theirs.find(item.key());
    require(from != nullptr && from->sizes() == item.value().sizes(), "train", "init_from: ", source.string(),
            " has no parameter '", item.key(), "' of shape ", item.value().sizes());
    item.value().copy_(*from);
  }
  for (auto& item : model.module().named_buffers(/*recurse=*/true)) {
    const at::Tensor* from = their_buffers.find(item.key());
    if (from != nullptr && from->sizes() == item.value().sizes()) item.value().copy_(*from);
  }
}

}  // namespace posenc::nn
