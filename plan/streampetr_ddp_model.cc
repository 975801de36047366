// StreamPETR's reference model as DDP sees it; see streampetr_ddp_model.h. Each builder below
// names the source it mirrors; the commits and line numbers are in
// docs/research/streampetr_parameters.md ("StreamPETR" = exiawsh/StreamPETR 95f6470, "mmcv" =
// open-mmlab/mmcv v1.6.0, "mmdet3d" = open-mmlab/mmdetection3d v1.0.0rc6, "mmdet" = mmdetection
// v2.28.2, the versions StreamPETR's docs/setup.md installs).
//
// Order: PyTorch's state_dict() visits modules in registration order (pre-order) and writes each
// module's own parameters, then its own buffers; named_parameters() visits the same modules in
// the same order but skips a module (and so a parameter) it has seen already. Registration order
// is the order of attribute assignments in __init__; re-assigning an attribute keeps its slot.
#include "plan/streampetr_ddp_model.h"

#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "base/assert.h"

namespace petrsim {
namespace {

constexpr uint64_t kEmbed = 256;   // StreamPETRHead embed_dims, FocalHead embed_dims, CPFPN out_channels
constexpr uint32_t kNumPred = 6;   // StreamPETRHead.num_pred, hard-coded (streampetr_head.py)
constexpr uint64_t kClasses = 10;  // num_classes (config); cls_out_channels with a sigmoid FocalLoss
constexpr uint64_t kCodeSize = 10;

class TensorList {
 public:
  explicit TensorList(DdpModel& model) : model_(model) {}

  // One parameter; `aliases`: how many more state_dict keys name the same tensor.
  void Parameter(const std::string& name, std::initializer_list<uint64_t> shape, bool requires_grad = true,
                 uint32_t aliases = 0) {
    DdpTensor* t = Add(name, DdpTensor::parameter, shape, Collective::float32);
    if (!requires_grad) t->set_requires_grad(false);
    if (aliases > 0) t->set_state_dict_aliases(aliases);
  }

  // One persistent buffer.
  void Buffer(const std::string& name, std::initializer_list<uint64_t> shape, Collective::Dtype dtype) {
    Add(name, DdpTensor::buffer, shape, dtype);
  }

  // torch.nn.Linear(in, out) (and mmcv.cnn.Linear, its subclass): weight [out, in], bias [out].
  void Linear(const std::string& prefix, uint64_t in, uint64_t out, uint32_t aliases = 0) {
    Parameter(prefix + "weight", {out, in}, true, aliases);
    Parameter(prefix + "bias", {out}, true, aliases);
  }

  // torch.nn.LayerNorm(n) with elementwise_affine, or torch.nn.GroupNorm(g, n): weight [n], bias [n].
  void Affine(const std::string& prefix, uint64_t n, uint32_t aliases = 0) {
    Parameter(prefix + "weight", {n}, true, aliases);
    Parameter(prefix + "bias", {n}, true, aliases);
  }

  // torch.nn.Conv2d(in, out, k): weight [out, in, k, k], then bias [out] when it has one.
  void Conv(const std::string& prefix, uint64_t in, uint64_t out, uint64_t k, bool bias) {
    Parameter(prefix + "weight", {out, in, k, k});
    if (bias) Parameter(prefix + "bias", {out});
  }

  // torch.nn.BatchNorm2d(n) from mmcv's build_norm_layer(dict(type='BN2d', requires_grad=False)),
  // which sets requires_grad=False on weight and bias (mmcv mmcv/cnn/bricks/norm.py). _NormBase
  // registers weight, bias, then the buffers running_mean, running_var (float32) and
  // num_batches_tracked (int64 scalar), all persistent.
  void FrozenBatchNorm(const std::string& prefix, uint64_t n) {
    Parameter(prefix + "weight", {n}, false);
    Parameter(prefix + "bias", {n}, false);
    Buffer(prefix + "running_mean", {n}, Collective::float32);
    Buffer(prefix + "running_var", {n}, Collective::float32);
    Buffer(prefix + "num_batches_tracked", {}, Collective::int64);
  }

 private:
  DdpTensor* Add(const std::string& name, DdpTensor::Kind kind, std::initializer_list<uint64_t> shape,
                 Collective::Dtype dtype) {
    DdpTensor* t = model_.add_tensors();
    t->set_name(name);
    t->set_kind(kind);
    for (const uint64_t size : shape) t->add_shape(size);
    t->set_dtype(dtype);
    return t;
  }

  DdpModel& model_;
};

// StreamPETR projects/mmdet3d_plugin/models/utils/misc.py MLN(c_dim, f_dim=256): reduce =
// Sequential(Linear(c_dim, 256), ReLU), gamma, beta = Linear(256, 256), ln = LayerNorm without
// affine (no tensors).
void Mln(TensorList& list, const std::string& prefix, uint64_t c_dim) {
  list.Linear(prefix + "reduce.0.", c_dim, kEmbed);
  list.Linear(prefix + "gamma.", kEmbed, kEmbed);
  list.Linear(prefix + "beta.", kEmbed, kEmbed);
}

// One PETRTemporalDecoderLayer (StreamPETR projects/mmdet3d_plugin/models/utils/petr_transformer.py):
// attentions (ModuleList), ffns (ModuleList), norms (ModuleList), in that order.
void DecoderLayer(TensorList& list, const std::string& prefix) {
  // attentions.0: mmcv MultiheadAttention (mmcv mmcv/cnn/bricks/transformer.py), whose `attn` is
  // torch.nn.MultiheadAttention(256, 8): in_proj_weight, in_proj_bias, then out_proj (kdim == vdim,
  // so q/k/v_proj_weight are None; add_bias_kv false, so no bias_k/bias_v). proj_drop and
  // dropout_layer hold no tensors.
  list.Parameter(prefix + "attentions.0.attn.in_proj_weight", {3 * kEmbed, kEmbed});
  list.Parameter(prefix + "attentions.0.attn.in_proj_bias", {3 * kEmbed});
  list.Linear(prefix + "attentions.0.attn.out_proj.", kEmbed, kEmbed);
  // attentions.1: PETRMultiheadFlashAttention (petr_transformer.py), whose `attn` is FlashMHA
  // (StreamPETR projects/mmdet3d_plugin/models/utils/attention.py): in_proj_weight, in_proj_bias
  // (its `bias` argument receives attn_drop = 0.1, truthy), inner_attn (no tensors), out_proj.
  // Created as torch.empty without dtype, so float32: the dtype=torch.float16 it is given reaches
  // only FlashAttention, which has no parameters.
  list.Parameter(prefix + "attentions.1.attn.in_proj_weight", {3 * kEmbed, kEmbed});
  list.Parameter(prefix + "attentions.1.attn.in_proj_bias", {3 * kEmbed});
  list.Linear(prefix + "attentions.1.attn.out_proj.", kEmbed, kEmbed);
  // ffns.0: mmcv FFN(256, feedforward_channels=2048, num_fcs=2): layers = Sequential(
  // Sequential(Linear(256, 2048), ReLU, Dropout), Linear(2048, 256), Dropout).
  list.Linear(prefix + "ffns.0.layers.0.0.", kEmbed, 2048);
  list.Linear(prefix + "ffns.0.layers.1.", 2048, kEmbed);
  // norms.0-2: operation_order has 3 'norm's; norm_cfg LN -> torch.nn.LayerNorm(256).
  for (int i = 0; i < 3; ++i) list.Affine(prefix + "norms." + std::to_string(i) + ".", kEmbed);
}

// pts_bbox_head: StreamPETRHead (StreamPETR projects/mmdet3d_plugin/models/dense_heads/streampetr_head.py).
void StreamPetrHead(TensorList& list, uint32_t decoder_layers) {
  const std::string p = "pts_bbox_head.";
  // Its own Parameters, all requires_grad=False, registered in __init__ after build_transformer;
  // a module's own parameters come before its children's. torch.tensor of Python floats:
  // float32. code_weights and match_costs: the config's 10 code_weights; pc_range: the 6 numbers
  // of bbox_coder.pc_range; position_range: 6; coords_d: depth_num (default 64) depth bins.
  list.Parameter(p + "code_weights", {kCodeSize}, false);
  list.Parameter(p + "match_costs", {kCodeSize}, false);
  list.Parameter(p + "pc_range", {6}, false);
  list.Parameter(p + "position_range", {6}, false);
  list.Parameter(p + "coords_d", {64}, false);
  // Children. AnchorFreeHead.__init__ (mmdet mmdet/models/dense_heads/anchor_free_head.py),
  // called through super().__init__, registers loss_cls and loss_bbox (no tensors) and then calls
  // self._init_layers(), i.e. StreamPETRHead._init_layers, so these modules take their slots
  // before loss_iou and transformer; the second _init_layers() call at the end of __init__
  // re-assigns them in place.
  //
  // cls_branches / reg_branches: nn.ModuleList([fc_cls for _ in range(num_pred)]), the SAME
  // Sequential in all 6 slots (shared weights, as in DETR; StreamPETR issue #46). state_dict()
  // lists each tensor under cls_branches.0 ... cls_branches.5; named_parameters() and
  // named_modules() only under slot 0. Listed once here, with state_dict_aliases = 5 naming
  // keys cls_branches.{1..5}.<same suffix>.
  // fc_cls = Sequential(Linear, LayerNorm, ReLU, Linear, LayerNorm, ReLU, Linear(256, 10)).
  constexpr uint32_t kAliases = kNumPred - 1;
  list.Linear(p + "cls_branches.0.0.", kEmbed, kEmbed, kAliases);
  list.Affine(p + "cls_branches.0.1.", kEmbed, kAliases);
  list.Linear(p + "cls_branches.0.3.", kEmbed, kEmbed, kAliases);
  list.Affine(p + "cls_branches.0.4.", kEmbed, kAliases);
  list.Linear(p + "cls_branches.0.6.", kEmbed, kClasses, kAliases);
  // reg_branch = Sequential(Linear, ReLU, Linear, ReLU, Linear(256, code_size 10)); keys
  // reg_branches.{1..5}.<same suffix> alias these.
  list.Linear(p + "reg_branches.0.0.", kEmbed, kEmbed, kAliases);
  list.Linear(p + "reg_branches.0.2.", kEmbed, kEmbed, kAliases);
  list.Linear(p + "reg_branches.0.4.", kEmbed, kCodeSize, kAliases);
  // position_encoder: Sequential(Linear(position_dim = depth_num * 3 = 192, 1024), ReLU, Linear(1024, 256)).
  list.Linear(p + "position_encoder.0.", 64 * 3, 4 * kEmbed);
  list.Linear(p + "position_encoder.2.", 4 * kEmbed, kEmbed);
  // memory_embed: Sequential(Linear(in_channels 256, 256), ReLU, Linear(256, 256)).
  list.Linear(p + "memory_embed.0.", kEmbed, kEmbed);
  list.Linear(p + "memory_embed.2.", kEmbed, kEmbed);
  // featurized_pe: SELayer_Linear(256) (misc.py): conv_reduce, act1, conv_expand, gate.
  list.Linear(p + "featurized_pe.conv_reduce.", kEmbed, kEmbed);
  list.Linear(p + "featurized_pe.conv_expand.", kEmbed, kEmbed);
  // reference_points: nn.Embedding(num_query 644, 3). pseudo_reference_points:
  // nn.Embedding(num_propagated 256, 3), set requires_grad=False by init_weights(), which
  // tools/train.py calls (model.init_weights()) before the trainer wraps the model in DDP.
  list.Parameter(p + "reference_points.weight", {644, 3});
  list.Parameter(p + "pseudo_reference_points.weight", {256, 3}, false);
  // query_embedding: Sequential(Linear(256 * 3 // 2 = 384, 256), ReLU, Linear(256, 256)).
  list.Linear(p + "query_embedding.0.", kEmbed * 3 / 2, kEmbed);
  list.Linear(p + "query_embedding.2.", kEmbed, kEmbed);
  // spatial_alignment: MLN(8).
  Mln(list, p + "spatial_alignment.", 8);
  // time_embedding: Sequential(Linear(256, 256), LayerNorm(256)).
  list.Linear(p + "time_embedding.0.", kEmbed, kEmbed);
  list.Affine(p + "time_embedding.1.", kEmbed);
  // with_ego_pos=True: ego_pose_pe, ego_pose_memory = MLN(180).
  Mln(list, p + "ego_pose_pe.", 180);
  Mln(list, p + "ego_pose_memory.", 180);
  // loss_iou (no tensors), then transformer: PETRTemporalTransformer (petr_transformer.py) with
  // encoder=None (a plain attribute) and decoder = PETRTransformerDecoder, an mmcv
  // TransformerLayerSequence: layers (ModuleList of num_layers PETRTemporalDecoderLayer), then
  // post_norm = LayerNorm(256) (post_norm_cfg default LN). bbox_coder, assigner and sampler are
  // not modules.
  for (uint32_t layer = 0; layer < decoder_layers; ++layer) {
    DecoderLayer(list, p + "transformer.decoder.layers." + std::to_string(layer) + ".");
  }
  list.Affine(p + "transformer.decoder.post_norm.", kEmbed);
}

// img_backbone: mmdet ResNet(depth=50, num_stages=4, style='pytorch', frozen_stages=-1,
// norm_cfg=BN2d requires_grad=False, norm_eval=True, with_cp=True) (mmdet
// mmdet/models/backbones/resnet.py and mmdet/models/utils/res_layer.py). Stem: conv1 (7x7, no
// bias), bn1 (add_module(norm1_name)), relu, maxpool; then layer1..layer4 by add_module. With
// frozen_stages=-1 only the BatchNorm affine parameters are frozen; norm_eval keeps their
// running statistics fixed in training but they stay buffers. with_cp changes no tensor.
void ResNet50(TensorList& list) {
  const std::string p = "img_backbone.";
  list.Conv(p + "conv1.", 3, 64, 7, false);
  list.FrozenBatchNorm(p + "bn1.", 64);
  constexpr uint64_t kBlocks[4] = {3, 4, 6, 3};  // arch_settings[50]
  uint64_t inplanes = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const uint64_t planes = uint64_t{64} << stage;  // base_channels * 2**i
    for (uint64_t block = 0; block < kBlocks[stage]; ++block) {
      // Bottleneck (expansion 4): conv1 (1x1), bn1, conv2 (3x3), bn2, conv3 (1x1), bn3, relu,
      // downsample; convs have no bias (bias=False).
      const std::string b = p + "layer" + std::to_string(stage + 1) + "." + std::to_string(block) + ".";
      list.Conv(b + "conv1.", inplanes, planes, 1, false);
      list.FrozenBatchNorm(b + "bn1.", planes);
      list.Conv(b + "conv2.", planes, planes, 3, false);
      list.FrozenBatchNorm(b + "bn2.", planes);
      list.Conv(b + "conv3.", planes, 4 * planes, 1, false);
      list.FrozenBatchNorm(b + "bn3.", 4 * planes);
      // ResLayer: the first block of every stage gets downsample = Sequential(conv 1x1 (stride),
      // norm) (stride != 1 or inplanes != planes * 4 holds for all four stages of ResNet-50).
      if (block == 0) {
        list.Conv(b + "downsample.0.", inplanes, 4 * planes, 1, false);
        list.FrozenBatchNorm(b + "downsample.1.", 4 * planes);
      }
      inplanes = 4 * planes;
    }
  }
}

// img_neck: CPFPN(in_channels=[1024, 2048], out_channels=256, num_outs=2) (StreamPETR
// projects/mmdet3d_plugin/models/necks/cp_fpn.py): lateral_convs (one 1x1 ConvModule per input
// level), then fpn_convs (a 3x3 ConvModule for level 0 only; no extra levels since num_outs = 2
// inputs). mmcv ConvModule with norm_cfg=None and act_cfg=None holds only `conv`, with bias
// (bias='auto' and no norm; mmcv mmcv/cnn/bricks/conv_module.py).
void CpFpn(TensorList& list) {
  const std::string p = "img_neck.";
  list.Conv(p + "lateral_convs.0.conv.", 1024, kEmbed, 1, true);
  list.Conv(p + "lateral_convs.1.conv.", 2048, kEmbed, 1, true);
  list.Conv(p + "fpn_convs.0.conv.", kEmbed, kEmbed, 3, true);
}

// img_roi_head: FocalHead(num_classes=10, in_channels=256) (StreamPETR
// projects/mmdet3d_plugin/models/dense_heads/focal_head.py). AnchorFreeHead.__init__ registers
// loss_cls, loss_bbox (no tensors) and calls FocalHead._init_layers: cls, shared_reg, shared_cls,
// centerness, ltrb, center2d; the loss modules after it hold no tensors.
void FocalHead(TensorList& list) {
  const std::string p = "img_roi_head.";
  list.Conv(p + "cls.", kEmbed, kClasses, 1, true);
  // shared_reg, shared_cls: Sequential(Conv2d(256, 256, 3, padding=1), GroupNorm(32, 256), ReLU).
  list.Conv(p + "shared_reg.0.", kEmbed, kEmbed, 3, true);
  list.Affine(p + "shared_reg.1.", kEmbed);
  list.Conv(p + "shared_cls.0.", kEmbed, kEmbed, 3, true);
  list.Affine(p + "shared_cls.1.", kEmbed);
  list.Conv(p + "centerness.", kEmbed, 1, 1, true);
  list.Conv(p + "ltrb.", kEmbed, 4, 1, true);
  list.Conv(p + "center2d.", kEmbed, 2, 1, true);
}

// The gradient-ready order of iteration 0's backward, which DDP's bucket rebuild follows
// (docs/research/streampetr_grad_ready_order.md). Autograd runs the backward nodes in the reverse
// of the order the forward created them (every consumer of a node was created after it), and a
// parameter's AccumulateGrad, which has the highest priority, runs as soon as the last of its
// uses has passed back its gradient: that is its FIRST use in the forward. So the ready order is
// the forward's parameter uses taken in reverse, each module at its first use only, and inside
// one use the order autograd gives that module's tensors. A checkpointed block (torch.utils.
// checkpoint, reentrant) re-runs its forward inside its backward node, which orders its
// parameters the same way, at the block's place. The within-module orders and these rules were
// checked on torch 1.13 by tests/real_ddp/grad_ready_rules.py.
class ForwardWalk {
 public:
  // torch.nn.Linear: the bias (an edge of addmm / add) before the weight (behind weight.t()).
  void Linear(const std::string& prefix) { Use({prefix + "bias", prefix + "weight"}); }
  // torch.nn.LayerNorm and GroupNorm: one backward node feeds weight and bias; weight first.
  void Norm(const std::string& prefix) { Use({prefix + "weight", prefix + "bias"}); }
  // torch.nn.Conv2d: one backward node feeds weight and bias; weight first (under autocast too).
  void Conv(const std::string& prefix, bool bias) {
    if (bias) {
      Use({prefix + "weight", prefix + "bias"});
    } else {
      Use({prefix + "weight"});
    }
  }
  // nn.Embedding's weight, or any parameter read directly.
  void Tensor(const std::string& name) { Use({name}); }
  // torch.nn.MultiheadAttention (F.multi_head_attention_forward) and StreamPETR's FlashMHA
  // (attention.py:135-142): q, k, v from in_proj_weight / in_proj_bias by
  // F._in_projection_packed, then out_proj. Out_proj first (bias, weight), then in_proj_bias,
  // in_proj_weight (the bias chunks' backward node was created after the weight chunks').
  void Attention(const std::string& prefix) {
    Use({prefix + "out_proj.bias", prefix + "out_proj.weight", prefix + "in_proj_bias", prefix + "in_proj_weight"});
  }

  // The names in gradient-ready order: uses from the last to the first, each name where it was
  // first used.
  std::vector<std::string> ReadyOrder() const {
    std::map<std::string, size_t> first_use;
    for (size_t i = 0; i < uses_.size(); ++i) {
      for (const std::string& name : uses_[i]) first_use.try_emplace(name, i);
    }
    std::vector<std::string> order;
    for (size_t i = uses_.size(); i-- > 0;) {
      for (const std::string& name : uses_[i]) {
        if (first_use.at(name) == i) order.push_back(name);
      }
    }
    return order;
  }

 private:
  void Use(std::vector<std::string> names) { uses_.push_back(std::move(names)); }

  std::vector<std::vector<std::string>> uses_;
};

// MLN.forward (misc.py:181-188): ln (no tensors), reduce(c), gamma, beta.
void MlnForward(ForwardWalk& walk, const std::string& prefix) {
  walk.Linear(prefix + "reduce.0.");
  walk.Linear(prefix + "gamma.");
  walk.Linear(prefix + "beta.");
}

// A Sequential(Linear, ReLU, Linear) such as position_encoder, memory_embed, query_embedding.
void TwoLinears(ForwardWalk& walk, const std::string& prefix) {
  walk.Linear(prefix + "0.");
  walk.Linear(prefix + "2.");
}

// PETRTemporalDecoderLayer._forward (petr_transformer.py:706-748) for operation_order self_attn,
// norm, cross_attn, norm, ffn, norm; the whole layer runs under cp.checkpoint (770-783).
void DecoderLayerForward(ForwardWalk& walk, const std::string& prefix) {
  walk.Attention(prefix + "attentions.0.attn.");  // 714: mmcv MultiheadAttention (transformer.py:541)
  walk.Norm(prefix + "norms.0.");                 // 728
  walk.Attention(prefix + "attentions.1.attn.");  // 732: PETRMultiheadFlashAttention (petr_transformer.py:164)
  walk.Norm(prefix + "norms.1.");
  walk.Linear(prefix + "ffns.0.layers.0.0.");  // 746: mmcv FFN.forward, self.layers(x) (transformer.py:623)
  walk.Linear(prefix + "ffns.0.layers.1.");
  walk.Norm(prefix + "norms.2.");
}

// petr3d.py:262 extract_feat: the backbone, then the neck.
void ImageFeaturesForward(ForwardWalk& walk) {
  // petr3d.py:262 extract_feat -> 80 img_backbone: mmdet ResNet.forward: conv1, norm1 (frozen),
  // relu, maxpool, then the stages. extract_feat runs under mmcv's auto_fp16 (autocast), which
  // keeps conv's order.
  walk.Conv("img_backbone.conv1.", false);
  constexpr int kBlocks[4] = {3, 4, 6, 3};
  for (int stage = 0; stage < 4; ++stage) {
    for (int block = 0; block < kBlocks[stage]; ++block) {
      // Bottleneck.forward's _inner_forward under cp.checkpoint (with_cp and x.requires_grad):
      // conv1, conv2, conv3 (norms frozen), then downsample(x) for the identity, used last.
      const std::string b = "img_backbone.layer" + std::to_string(stage + 1) + "." + std::to_string(block) + ".";
      walk.Conv(b + "conv1.", false);
      walk.Conv(b + "conv2.", false);
      walk.Conv(b + "conv3.", false);
      if (block == 0) walk.Conv(b + "downsample.0.", false);
    }
  }
  // petr3d.py:86 img_neck: CPFPN.forward (cp_fpn.py:162-183): the lateral convs in order, the
  // top-down add, then fpn_convs.0 on level 0 only (level 1's output is not used further).
  walk.Conv("img_neck.lateral_convs.0.conv.", true);
  walk.Conv("img_neck.lateral_convs.1.conv.", true);
  walk.Conv("img_neck.fpn_convs.0.conv.", true);
}

// Petr3D.forward_train (petr3d.py:221-277) for the reference config: queue_length 1 and
// num_frame_losses = num_frame_backbone_grads = num_frame_head_grads = 1, so one frame, with
// gradients everywhere, and no no_grad pass over earlier frames. Line numbers: StreamPETR files
// at 95f6470 unless another source is named.
ForwardWalk StreamPetrForward(uint32_t decoder_layers) {
  ForwardWalk walk;
  ImageFeaturesForward(walk);
  // petr3d.py:187 forward_roi_head -> 150 img_roi_head: FocalHead.forward (focal_head.py:158-170).
  walk.Conv("img_roi_head.shared_cls.0.", true);  // 159
  walk.Norm("img_roi_head.shared_cls.1.");
  walk.Conv("img_roi_head.cls.", true);           // 160
  walk.Conv("img_roi_head.centerness.", true);    // 161
  walk.Conv("img_roi_head.shared_reg.0.", true);  // 167
  walk.Norm("img_roi_head.shared_reg.1.");
  walk.Conv("img_roi_head.ltrb.", true);      // 168
  walk.Conv("img_roi_head.center2d.", true);  // 170
  // petr3d.py:189 pts_bbox_head: StreamPETRHead.forward (streampetr_head.py:566-650).
  // 581 pre_update_memory reads only the frozen pseudo_reference_points.
  const std::string h = "pts_bbox_head.";
  TwoLinears(walk, h + "position_encoder.");   // 589 position_embeding -> 412
  TwoLinears(walk, h + "memory_embed.");       // 591
  MlnForward(walk, h + "spatial_alignment.");  // 594
  // 595: SELayer_Linear.forward (misc.py:147-151): conv_reduce, conv_expand on x_se.
  walk.Linear(h + "featurized_pe.conv_reduce.");
  walk.Linear(h + "featurized_pe.conv_expand.");
  walk.Tensor(h + "reference_points.weight");  // 597-598: prepare_for_dn's torch.cat (489)
  TwoLinears(walk, h + "query_embedding.");    // 599
  // 603 temporal_alignment (420-449).
  TwoLinears(walk, h + "query_embedding.");  // 424, again
  MlnForward(walk, h + "ego_pose_memory.");  // 431
  MlnForward(walk, h + "ego_pose_pe.");      // 432
  MlnForward(walk, h + "ego_pose_pe.");      // 435
  MlnForward(walk, h + "ego_pose_memory.");  // 436
  for (int i = 0; i < 2; ++i) {              // 438, 439
    walk.Linear(h + "time_embedding.0.");
    walk.Norm(h + "time_embedding.1.");
  }
  // 606 transformer -> PETRTemporalTransformer.forward (495) -> PETRTransformerDecoder.forward
  // (410-418): each layer, then post_norm on its output (return_intermediate).
  for (uint32_t layer = 0; layer < decoder_layers; ++layer) {
    DecoderLayerForward(walk, h + "transformer.decoder.layers." + std::to_string(layer) + ".");
    walk.Norm(h + "transformer.decoder.post_norm.");
  }
  // 611-615: per decoder output, cls_branches[lvl] then reg_branches[lvl]; every slot is the
  // same Sequential, whose tensors the list names under slot 0.
  for (uint32_t lvl = 0; lvl < decoder_layers; ++lvl) {
    walk.Linear(h + "cls_branches.0.0.");  // fc_cls: Linear, LayerNorm, ReLU, Linear, LayerNorm, ReLU, Linear
    walk.Norm(h + "cls_branches.0.1.");
    walk.Linear(h + "cls_branches.0.3.");
    walk.Norm(h + "cls_branches.0.4.");
    walk.Linear(h + "cls_branches.0.6.");
    walk.Linear(h + "reg_branches.0.0.");  // reg_branch: Linear, ReLU, Linear, ReLU, Linear
    walk.Linear(h + "reg_branches.0.2.");
    walk.Linear(h + "reg_branches.0.4.");
  }
  // petr3d.py:193 pts_bbox_head.loss and 196 img_roi_head.loss use no parameter; their terms
  // are summed by mmdet's _parse_losses, so the backward starts at the last loss computed.
  return walk;
}

// Writes model.grad_ready_order: the positions (among the parameters that require grad, in list
// order) of the names `walk` makes ready, in that order. Every trainable tensor must be named
// exactly once, and only trainable ones.
void SetGradReadyOrder(DdpModel& model, const ForwardWalk& walk) {
  std::map<std::string, uint32_t> position;
  for (const DdpTensor& t : model.tensors()) {
    if (t.kind() == DdpTensor::parameter && t.requires_grad()) {
      const bool inserted = position.emplace(t.name(), static_cast<uint32_t>(position.size())).second;
      PETRSIM_ASSERT(inserted);
    }
  }
  std::vector<bool> seen(position.size(), false);
  for (const std::string& name : walk.ReadyOrder()) {
    const auto it = position.find(name);
    PETRSIM_ASSERT(it != position.end());
    PETRSIM_ASSERT(!seen[it->second]);
    seen[it->second] = true;
    model.add_grad_ready_order(it->second);
  }
  PETRSIM_ASSERT(static_cast<size_t>(model.grad_ready_order_size()) == position.size());
}

}  // namespace

DdpModel StreamPetrReferenceDdpModel(uint32_t decoder_layers) {
  DdpModel model;
  TensorList list(model);
  // Petr3D (StreamPETR projects/mmdet3d_plugin/models/detectors/petr3d.py) calls
  // MVXTwoStageDetector.__init__ (mmdet3d mmdet3d/models/detectors/mvx_two_stage.py), which
  // registers pts_bbox_head BEFORE img_backbone, img_neck and img_roi_head (the config has no
  // pts_voxel_*, pts_middle_encoder, pts_backbone, pts_neck or img_rpn_head); Petr3D then adds
  // grid_mask (GridMask, no tensors). Petr3D itself owns no tensors.
  StreamPetrHead(list, decoder_layers);
  ResNet50(list);
  CpFpn(list);
  FocalHead(list);
  SetGradReadyOrder(model, StreamPetrForward(decoder_layers));
  // StreamPETR projects/mmdet3d_plugin/core/apis/mmdet_train.py, custom_train_detector:
  // MMDistributedDataParallel(model.cuda(), device_ids=[...], broadcast_buffers=False,
  // find_unused_parameters=cfg.get('find_unused_parameters', False)); the config sets
  // find_unused_parameters=False. bucket_cap_mb is not passed: torch's default 25.
  model.set_bucket_cap_mb(25);
  model.set_first_bucket_mb(1);
  model.set_broadcast_buffers(false);
  model.set_find_unused_parameters(false);
  model.set_process_group("default_pg");
  return model;
}

}  // namespace petrsim
