// StreamPETR's reference model as DistributedDataParallel sees it: every parameter and buffer of
// Petr3D built from stream_petr_r50_flash_704_bs2_seq_24e.py (ResNet-50 with frozen BatchNorm,
// CPFPN, StreamPETRHead with its PETR temporal transformer, FocalHead), in state_dict() order,
// with shapes, dtypes and requires_grad, and the DDP arguments StreamPETR's trainer passes.
// Read from the sources in docs/research/streampetr_parameters.md, which also gives the totals;
// scripts/streampetr_param_count.py counts the same list with a hand-written torch equivalent.
#pragma once

#include <cstdint>

#include "model/scenario.pb.h"

namespace petrsim {

// The reference model with `decoder_layers` transformer decoder layers (the config's 6; the
// scenario validates [1, 64]). Only the decoder follows it: the head's shared classification
// and regression branches stay 6 ModuleList slots (StreamPETRHead hard-codes num_pred = 6), so
// each of their 16 parameters carries state_dict_aliases = 5. 511 entries for 6 layers; no
// entry uses `repeat`, so every state_dict key keeps its own name.
// broadcast_buffers = false, find_unused_parameters = false, bucket_cap_mb = 25,
// first_bucket_mb = 1, process group "default_pg".
DdpModel StreamPetrReferenceDdpModel(uint32_t decoder_layers);

}  // namespace petrsim
