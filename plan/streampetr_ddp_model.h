// StreamPETR's reference model as DistributedDataParallel sees it: every parameter and buffer of
// Petr3D built from stream_petr_r50_flash_704_bs2_seq_24e.py (ResNet-50 with frozen BatchNorm,
// CPFPN, StreamPETRHead with its PETR temporal transformer, FocalHead), in state_dict() order,
// with shapes, dtypes and requires_grad, and the DDP arguments StreamPETR's trainer passes.
// Read from the sources in docs/research/streampetr_parameters.md, which also gives the totals;
// scripts/streampetr_param_count.py counts the same list with a hand-written torch equivalent.
#pragma once

#include <cstdint>

#include "proto/scenario.pb.h"

namespace petrsim {

// The reference model with `decoder_layers` transformer decoder layers (the config's 6; the
// scenario validates [1, 64]). Only the decoder follows it: the head's shared classification
// and regression branches stay 6 ModuleList slots (StreamPETRHead hard-codes num_pred = 6), so
// each of their 16 parameters carries state_dict_aliases = 5. 511 entries for 6 layers; no
// entry uses `repeat`, so every state_dict key keeps its own name.
// grad_ready_order: the order iteration 0's backward makes the gradients ready, derived from
// the order Petr3D.forward_train uses each module (docs/research/streampetr_grad_ready_order.md):
// the 3D head's shared reg and cls branches first, its decoder layers last to first, its
// embeddings, then FocalHead, the neck and the backbone from layer4 down to the stem conv.
// broadcast_buffers = false, find_unused_parameters = false, bucket_cap_mb = 25,
// first_bucket_mb = 1, process group "default_pg".
DdpModel StreamPetrReferenceDdpModel(uint32_t decoder_layers);

}  // namespace petrsim
