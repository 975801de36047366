// The gradient-ready order of StreamPETR's reference model (plan/streampetr_ddp_model.h,
// docs/research/streampetr_grad_ready_order.md): a valid permutation, the anchor facts the
// forward walk gives, and the rebuilt gradient buckets it moves away from the reverse of
// registration. The rules behind it are checked on torch 1.13 by tests/real_ddp/grad_ready_rules.py.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "plan/ddp_plan.h"
#include "plan/streampetr_ddp_model.h"

namespace petrsim {
namespace {

// The names of the trainable parameters (requires_grad), in list order: what the positions of
// grad_ready_order index.
std::vector<std::string> Trainable(const DdpModel& model) {
  std::vector<std::string> names;
  for (const DdpTensor& t : model.tensors()) {
    if (t.kind() == DdpTensor::parameter && t.requires_grad()) names.push_back(t.name());
  }
  return names;
}

// Name -> rank in the ready order (0 = ready first).
std::map<std::string, size_t> ReadyRank(const DdpModel& model) {
  const std::vector<std::string> names = Trainable(model);
  std::map<std::string, size_t> rank;
  for (int i = 0; i < model.grad_ready_order_size(); ++i) rank[names.at(model.grad_ready_order(i))] = i;
  return rank;
}

// The parameter names in ready order.
std::vector<std::string> ReadyNames(const DdpModel& model) {
  const std::vector<std::string> names = Trainable(model);
  std::vector<std::string> order;
  for (const uint32_t position : model.grad_ready_order()) order.push_back(names.at(position));
  return order;
}

// Ranks (first, last) of the names that start with `prefix`.
std::pair<size_t, size_t> Span(const std::map<std::string, size_t>& rank, const std::string& prefix) {
  size_t first = SIZE_MAX, last = 0;
  for (const auto& [name, r] : rank) {
    if (name.rfind(prefix, 0) == 0) {
      first = std::min(first, r);
      last = std::max(last, r);
    }
  }
  EXPECT_NE(first, SIZE_MAX) << "no parameter under " << prefix;
  return {first, last};
}

// Every name under `earlier` is ready before every name under `later`.
void ExpectBefore(const std::map<std::string, size_t>& rank, const std::string& earlier, const std::string& later) {
  EXPECT_LT(Span(rank, earlier).second, Span(rank, later).first) << earlier << " should be ready before " << later;
}

std::vector<uint64_t> RebuiltBucketSizes(const DdpModel& model) {
  const DdpCollectives plan = DdpPlan(model, TorchVersion{1, 13});
  std::vector<uint64_t> sizes;
  for (const Collective& c : plan.backward[1]) sizes.push_back(c.numel());
  return sizes;
}

TEST(StreamPetrReadyOrder, IsAPermutationOfTheTrainableParametersForEveryDecoderDepth) {
  for (const uint32_t layers : {1u, 3u, 6u, 12u}) {
    const DdpModel model = StreamPetrReferenceDdpModel(layers);
    EXPECT_TRUE(ValidateDdpModel(model, "plan.ddp").empty()) << layers << " layers";
    EXPECT_EQ(static_cast<size_t>(model.grad_ready_order_size()), Trainable(model).size()) << layers << " layers";
  }
  EXPECT_EQ(StreamPetrReferenceDdpModel(6).grad_ready_order_size(), 240);  // P in streampetr_parameters.md
}

TEST(StreamPetrReadyOrder, TheHeadsSharedBranchesAreReadyFirstRegBeforeCls) {
  // The branches run after the decoder (streampetr_head.py:611-615); a shared tensor is ready
  // after its last backward use, level 0's, where reg_branches[0] ran after cls_branches[0].
  const DdpModel model = StreamPetrReferenceDdpModel(6);
  const std::vector<std::string> order = ReadyNames(model);
  ASSERT_GE(order.size(), 16u);
  EXPECT_EQ(order[0], "pts_bbox_head.reg_branches.0.4.bias");
  EXPECT_EQ(order[1], "pts_bbox_head.reg_branches.0.4.weight");
  EXPECT_EQ(order[6], "pts_bbox_head.cls_branches.0.6.bias");
  EXPECT_EQ(order[15], "pts_bbox_head.cls_branches.0.0.weight");
  const auto rank = ReadyRank(model);
  ExpectBefore(rank, "pts_bbox_head.reg_branches.", "pts_bbox_head.cls_branches.");
  ExpectBefore(rank, "pts_bbox_head.cls_branches.", "pts_bbox_head.transformer.");
}

TEST(StreamPetrReadyOrder, DecoderLayersLastToFirstWithPostNormBeforeLayerZero) {
  const auto rank = ReadyRank(StreamPetrReferenceDdpModel(6));
  const std::string d = "pts_bbox_head.transformer.decoder.";
  for (int layer = 5; layer > 0; --layer) {
    ExpectBefore(rank, d + "layers." + std::to_string(layer) + ".", d + "layers." + std::to_string(layer - 1) + ".");
  }
  // post_norm runs after every layer: its first use follows layer 0.
  ExpectBefore(rank, d + "layers.1.", d + "post_norm.");
  ExpectBefore(rank, d + "post_norm.", d + "layers.0.");
  // Inside a layer, the reverse of self_attn, norm, cross_attn, norm, ffn, norm.
  const std::string l = d + "layers.3.";
  ExpectBefore(rank, l + "norms.2.", l + "ffns.0.layers.1.");
  ExpectBefore(rank, l + "ffns.0.layers.0.0.", l + "norms.1.");
  ExpectBefore(rank, l + "norms.1.", l + "attentions.1.");
  ExpectBefore(rank, l + "attentions.1.", l + "norms.0.");
  ExpectBefore(rank, l + "norms.0.", l + "attentions.0.");
  EXPECT_EQ(rank.at(l + "attentions.0.attn.out_proj.bias") + 3, rank.at(l + "attentions.0.attn.in_proj_weight"));
}

TEST(StreamPetrReadyOrder, TheHeadsEmbeddingsFollowTheDecoderInReverseForwardOrder) {
  const auto rank = ReadyRank(StreamPetrReferenceDdpModel(6));
  const std::string h = "pts_bbox_head.";
  // temporal_alignment (streampetr_head.py:424-439) ran last before the transformer; each module
  // counts at its first use: time_embedding 438, ego_pose_pe 432, ego_pose_memory 431,
  // query_embedding 599 (its second use, 424, does not move it).
  ExpectBefore(rank, h + "transformer.decoder.layers.0.", h + "time_embedding.");
  ExpectBefore(rank, h + "time_embedding.", h + "ego_pose_pe.");
  ExpectBefore(rank, h + "ego_pose_pe.", h + "ego_pose_memory.");
  ExpectBefore(rank, h + "ego_pose_memory.", h + "query_embedding.");
  ExpectBefore(rank, h + "query_embedding.", h + "reference_points.");
  ExpectBefore(rank, h + "reference_points.", h + "featurized_pe.");
  ExpectBefore(rank, h + "featurized_pe.", h + "spatial_alignment.");
  ExpectBefore(rank, h + "spatial_alignment.", h + "memory_embed.");
  ExpectBefore(rank, h + "memory_embed.", h + "position_encoder.");
  // Linear: bias before weight; LayerNorm: weight before bias; MLN: beta, gamma, reduce.
  EXPECT_LT(rank.at(h + "time_embedding.1.weight"), rank.at(h + "time_embedding.1.bias"));
  EXPECT_LT(rank.at(h + "time_embedding.1.bias"), rank.at(h + "time_embedding.0.bias"));
  EXPECT_LT(rank.at(h + "time_embedding.0.bias"), rank.at(h + "time_embedding.0.weight"));
  ExpectBefore(rank, h + "ego_pose_pe.beta.", h + "ego_pose_pe.gamma.");
  ExpectBefore(rank, h + "ego_pose_pe.gamma.", h + "ego_pose_pe.reduce.");
}

TEST(StreamPetrReadyOrder, ThenFocalHeadTheNeckAndTheBackboneWithTheStemLast) {
  const DdpModel model = StreamPetrReferenceDdpModel(6);
  const auto rank = ReadyRank(model);
  // The 3D head's forward ran after FocalHead's (petr3d.py:187-189), so all of it is ready first.
  ExpectBefore(rank, "pts_bbox_head.", "img_roi_head.");
  ExpectBefore(rank, "img_roi_head.", "img_neck.");
  ExpectBefore(rank, "img_neck.", "img_backbone.");
  // FocalHead.forward (focal_head.py:159-170), reversed.
  ExpectBefore(rank, "img_roi_head.center2d.", "img_roi_head.ltrb.");
  ExpectBefore(rank, "img_roi_head.ltrb.", "img_roi_head.shared_reg.");
  ExpectBefore(rank, "img_roi_head.shared_reg.1.", "img_roi_head.shared_reg.0.");
  ExpectBefore(rank, "img_roi_head.shared_reg.", "img_roi_head.centerness.");
  ExpectBefore(rank, "img_roi_head.centerness.", "img_roi_head.cls.");
  ExpectBefore(rank, "img_roi_head.cls.", "img_roi_head.shared_cls.");
  // CPFPN (cp_fpn.py:162-183): fpn_convs.0 last used, lateral 1 before lateral 0.
  ExpectBefore(rank, "img_neck.fpn_convs.0.", "img_neck.lateral_convs.1.");
  ExpectBefore(rank, "img_neck.lateral_convs.1.", "img_neck.lateral_convs.0.");
  EXPECT_LT(rank.at("img_neck.fpn_convs.0.conv.weight"), rank.at("img_neck.fpn_convs.0.conv.bias"));
  // ResNet: layer4 down to layer1, blocks last to first, the stem conv last of all.
  ExpectBefore(rank, "img_backbone.layer4.", "img_backbone.layer3.");
  ExpectBefore(rank, "img_backbone.layer3.", "img_backbone.layer2.");
  ExpectBefore(rank, "img_backbone.layer2.", "img_backbone.layer1.");
  ExpectBefore(rank, "img_backbone.layer3.5.", "img_backbone.layer3.4.");
  // A Bottleneck's downsample is used last (after conv3), so ready first.
  const std::vector<std::string> order = ReadyNames(model);
  const std::vector<std::string> block = {"downsample.0", "conv3", "conv2", "conv1"};
  for (size_t i = 0; i < block.size(); ++i) {
    EXPECT_EQ(rank.at("img_backbone.layer2.0." + block[i] + ".weight"),
              rank.at("img_backbone.layer2.1.conv1.weight") + 1 + i);
  }
  EXPECT_EQ(order.back(), "img_backbone.conv1.weight");
}

TEST(StreamPetrReadyOrder, RebuiltBucketsDifferFromTheReverseOfRegistration) {
  const DdpModel model = StreamPetrReferenceDdpModel(6);
  DdpModel reverse = model;
  reverse.clear_grad_ready_order();
  const std::vector<uint64_t> walked = RebuiltBucketSizes(model), reversed = RebuiltBucketSizes(reverse);
  // Reverse registration starts with FocalHead's last-registered convs, whose 1 MiB first bucket
  // closes at shared_cls.0.weight; the walk starts with the shared reg and cls branches:
  // 134,154 + 135,178 elements.
  ASSERT_FALSE(walked.empty());
  ASSERT_FALSE(reversed.empty());
  EXPECT_EQ(reversed[0], 592391u);
  EXPECT_EQ(walked[0], 269332u);
  EXPECT_NE(walked, reversed);
  uint64_t walked_total = 0, reversed_total = 0;
  for (const uint64_t n : walked) walked_total += n;
  for (const uint64_t n : reversed) reversed_total += n;
  EXPECT_EQ(walked_total, 37205361u);  // every trainable element, once
  EXPECT_EQ(reversed_total, walked_total);
  // Iteration 0 (one bucket in 1.12+) and the construction broadcasts do not depend on it.
  const DdpCollectives a = DdpPlan(model, TorchVersion{1, 13}), b = DdpPlan(reverse, TorchVersion{1, 13});
  ASSERT_EQ(a.backward[0].size(), b.backward[0].size());
  EXPECT_EQ(a.backward[0][0].numel(), b.backward[0][0].numel());
  EXPECT_EQ(a.construction.size(), b.construction.size());
}

}  // namespace
}  // namespace petrsim
