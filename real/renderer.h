// The real backend's data (issue "real backend", section Data): a deterministic renderer that
// turns a frame's ground-truth boxes into six small surround-camera images in which the boxes
// are visible, so a small StreamPETR can learn from them. Plain C++ (no LibTorch): the trainer
// copies the pixels into tensors.
//
// Scene content: each scene gets an ego trajectory (constant speed and turn rate from the
// scene's seed) and each of its boxes a world position and velocity, so one object keeps its
// identity and moves consistently from frame to frame (what the streaming memory exploits).
// Boxes are cuboids of a size per class; each class has its own colour; the picture is a
// ground/sky gradient with every box's projected cuboid filled, nearest in front (a z-buffer
// per pixel).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "real/geometry.h"

namespace petrsim::real {

inline constexpr uint32_t kRenderClasses = 10;  // nuScenes detection classes

struct RenderBox {
  double x = 0, y = 0, z = 0;  // centre, lidar (ego) frame, metres
  double w = 0, l = 0, h = 0;  // size, metres
  double yaw = 0;
  uint32_t cls = 0;  // < kRenderClasses
};

struct RenderedFrame {
  Mat4 ego2global;
  std::vector<RenderBox> boxes;  // in the frame's lidar frame
};

// Frame `frame` of the scene with seed `scene_seed` holding `boxes` objects (objects 0..boxes-1
// of the scene, the same objects in every frame that has that many). `classes[i]` is object i's
// class if given (else one drawn from the seed). Deterministic.
RenderedFrame SceneFrame(uint64_t scene_seed, uint32_t frame, uint32_t boxes,
                         const std::vector<uint32_t>& classes = {});

// The six images, [camera][channel 0..2][row][column] flattened, values in [0, 1].
std::vector<float> Render(const std::vector<Camera>& rig, const std::vector<RenderBox>& boxes);

// The colour of a class (RGB in [0, 1]).
std::array<float, 3> ClassColour(uint32_t cls);

}  // namespace petrsim::real
