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
#include "model/streampetr_ddp_model.h"

#include <initializer_list>
#include <string>

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
