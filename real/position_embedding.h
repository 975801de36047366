// PETR's 3D position embedding inputs (docs/reference/streampetr.md, section 11), in LibTorch: for every feature
// pixel of every camera and every depth bin, the frustum point [u*d, v*d, d, 1] through
// inverse(lidar2img), normalised to the position range, then the inverse sigmoid the MLP reads;
// and the motion-aware layer norm (MLN) that conditions the streaming memory on ego motion.
#pragma once

#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <vector>

namespace petrsim::real {

// img2lidar: [N, 4, 4] (one per camera). Feature pixel (row, col) of a map with stride `stride`
// sits at image (u, v) = ((col + 0.5) * stride, (row + 0.5) * stride). Returns [N, H, W, D, 3]:
// the lidar-frame points normalised by `range` = {x_min, y_min, z_min, x_max, y_max, z_max}.
torch::Tensor FrustumCoords(const torch::Tensor& img2lidar, int64_t height, int64_t width, double stride,
                            const std::vector<double>& depth_bins, const std::array<double, 6>& range);

// log(x / (1 - x)) with x clamped to [eps, 1 - eps] (mmdet's inverse_sigmoid).
torch::Tensor InverseSigmoid(const torch::Tensor& x, double eps = 1e-5);

// Motion-aware layer norm: LayerNorm without affine, then gamma(h) * x + beta(h), where gamma and
// beta are linear in the motion vector h. Initialised so that gamma = 1 and beta = 0 (a plain
// layer norm until training moves it), as StreamPETR's MLN is.
struct MotionLayerNormImpl : torch::nn::Module {
  MotionLayerNormImpl(int64_t channels, int64_t motion_dims);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& motion);
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear gamma{nullptr}, beta{nullptr};
};
TORCH_MODULE(MotionLayerNorm);

}  // namespace petrsim::real
