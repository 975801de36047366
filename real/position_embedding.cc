// PETR position embedding inputs and the motion-aware layer norm; see position_embedding.h.
#include "real/position_embedding.h"

namespace petrsim::real {

torch::Tensor FrustumCoords(const torch::Tensor& img2lidar, int64_t height, int64_t width, double stride,
                            const std::vector<double>& depth_bins, const std::array<double, 6>& range) {
  TORCH_CHECK(img2lidar.dim() == 3 && img2lidar.size(1) == 4 && img2lidar.size(2) == 4,
              "FrustumCoords: img2lidar [N, 4, 4] expected");
  const auto options = torch::TensorOptions().dtype(img2lidar.dtype());
  const auto u = (torch::arange(width, options) + 0.5) * stride;   // [W]
  const auto v = (torch::arange(height, options) + 0.5) * stride;  // [H]
  const auto d = torch::tensor(depth_bins, options);               // [D]
  const int64_t depth = d.size(0);
  // [H, W, D, 4]: (u*d, v*d, d, 1).
  const auto uu = u.view({1, width, 1}).expand({height, width, depth});
  const auto vv = v.view({height, 1, 1}).expand({height, width, depth});
  const auto dd = d.view({1, 1, depth}).expand({height, width, depth});
  const auto points = torch::stack({uu * dd, vv * dd, dd, torch::ones_like(dd)}, -1);
  // [N, H, W, D, 4] = img2lidar[n] @ point.
  const auto lidar = torch::einsum("nij,hwdj->nhwdi", {img2lidar, points}).narrow(-1, 0, 3);
  const auto low = torch::tensor({range[0], range[1], range[2]}, options);
  const auto high = torch::tensor({range[3], range[4], range[5]}, options);
  return (lidar - low) / (high - low);
}

torch::Tensor InverseSigmoid(const torch::Tensor& x, double eps) {
  const auto clamped = x.clamp(0, 1);
  return torch::log(clamped.clamp_min(eps) / (1 - clamped).clamp_min(eps));
}

MotionLayerNormImpl::MotionLayerNormImpl(int64_t channels, int64_t motion_dims) {
  norm =
      register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({channels}).elementwise_affine(false)));
  gamma = register_module("gamma", torch::nn::Linear(motion_dims, channels));
  beta = register_module("beta", torch::nn::Linear(motion_dims, channels));
  torch::NoGradGuard no_grad;
  gamma->weight.zero_();
  gamma->bias.fill_(1);
  beta->weight.zero_();
  beta->bias.zero_();
}

torch::Tensor MotionLayerNormImpl::forward(const torch::Tensor& x, const torch::Tensor& motion) {
  return gamma(motion) * norm(x) + beta(motion);
}

}  // namespace petrsim::real
