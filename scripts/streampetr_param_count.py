"""Count the tensors of StreamPETR's reference model with a hand-written torch.nn equivalent.

This is NOT StreamPETR's code: it is a hand-written equivalent, built only to count and order
the model's parameters and buffers the way PyTorch lists them (state_dict(), named_parameters(),
named_buffers()), for docs/research/streampetr_parameters.md and to cross-check
plan/streampetr_ddp_model.cc. Each class below mirrors the registration order (the order of
attribute assignments / add_module calls in __init__) and the tensor shapes of the module it
names; forward passes are not reproduced. The sources it mirrors (commits in the doc):

  Petr3D / MVXTwoStageDetector   StreamPETR projects/mmdet3d_plugin/models/detectors/petr3d.py,
                                 mmdet3d v1.0.0rc6 mmdet3d/models/detectors/mvx_two_stage.py
  StreamPETRHead                 StreamPETR projects/mmdet3d_plugin/models/dense_heads/streampetr_head.py
  PETRTemporalTransformer etc.   StreamPETR projects/mmdet3d_plugin/models/utils/petr_transformer.py
  FlashMHA                       StreamPETR projects/mmdet3d_plugin/models/utils/attention.py
  MLN, SELayer_Linear            StreamPETR projects/mmdet3d_plugin/models/utils/misc.py
  MultiheadAttention, FFN        mmcv v1.6.0 mmcv/cnn/bricks/transformer.py
  ResNet-50 (mmdet 2.x)          mmdet v2.28.2 mmdet/models/backbones/resnet.py, utils/res_layer.py
  CPFPN                          StreamPETR projects/mmdet3d_plugin/models/necks/cp_fpn.py
  FocalHead                      StreamPETR projects/mmdet3d_plugin/models/dense_heads/focal_head.py

Run (Debian's python3-torch is visible only to /usr/bin/python3):

    /usr/bin/python3 scripts/streampetr_param_count.py [--decoder-layers 6] [--list] [--modules]

It prints the totals; --list also prints every state_dict() entry, in order, as
"kind name shape dtype requires_grad [shared-with ...]" (a shared parameter once, at its first
key); --modules a Markdown table per module. Deterministic; needs no GPU.
"""
import argparse

import torch
from torch import nn

EMBED = 256


class ConvModule(nn.Module):
    """mmcv ConvModule with norm_cfg=None, act_cfg=None: only `conv` (bias=True)."""

    def __init__(self, cin, cout, k, padding=0):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, padding=padding, bias=True)


class Bottleneck(nn.Module):
    """mmdet ResNet Bottleneck: conv1, bn1, conv2, bn2, conv3, bn3, relu, downsample."""

    expansion = 4

    def __init__(self, inplanes, planes, stride, downsample):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.add_module('bn1', nn.BatchNorm2d(planes))
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.add_module('bn2', nn.BatchNorm2d(planes))
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.add_module('bn3', nn.BatchNorm2d(planes * 4))
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample


class ResNet50(nn.Module):
    """mmdet ResNet(depth=50): conv1, bn1, relu, maxpool, layer1..layer4 (3, 4, 6, 3 blocks).

    norm_cfg=dict(type='BN2d', requires_grad=False): mmcv build_norm_layer sets requires_grad=False
    on every BN weight and bias; frozen_stages=-1 freezes nothing else.
    """

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.add_module('bn1', nn.BatchNorm2d(64))
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        inplanes = 64
        for i, (blocks, stride) in enumerate(zip((3, 4, 6, 3), (1, 2, 2, 2))):
            planes = 64 * 2**i
            layers = []
            for b in range(blocks):
                downsample = None
                if b == 0 and (stride != 1 or inplanes != planes * 4):
                    downsample = nn.Sequential(nn.Conv2d(inplanes, planes * 4, 1, stride=stride, bias=False),
                                               nn.BatchNorm2d(planes * 4))
                layers.append(Bottleneck(inplanes, planes, stride if b == 0 else 1, downsample))
                inplanes = planes * 4
            self.add_module(f'layer{i + 1}', nn.Sequential(*layers))
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                for p in m.parameters():
                    p.requires_grad = False


class CPFPN(nn.Module):
    """in_channels=[1024, 2048], out_channels=256, num_outs=2: 2 lateral 1x1 convs, 1 fpn 3x3 conv."""

    def __init__(self):
        super().__init__()
        self.lateral_convs = nn.ModuleList([ConvModule(1024, 256, 1), ConvModule(2048, 256, 1)])
        self.fpn_convs = nn.ModuleList([ConvModule(256, 256, 3, padding=1)])


class FocalHead(nn.Module):
    """_init_layers: cls, shared_reg, shared_cls, centerness, ltrb, center2d (loss modules: no tensors)."""

    def __init__(self, num_classes=10, in_channels=256, embed_dims=256):
        super().__init__()
        self.cls = nn.Conv2d(embed_dims, num_classes, 1)
        self.shared_reg = nn.Sequential(nn.Conv2d(in_channels, embed_dims, 3, padding=1), nn.GroupNorm(32, embed_dims),
                                        nn.ReLU())
        self.shared_cls = nn.Sequential(nn.Conv2d(in_channels, embed_dims, 3, padding=1), nn.GroupNorm(32, embed_dims),
                                        nn.ReLU())
        self.centerness = nn.Conv2d(embed_dims, 1, 1)
        self.ltrb = nn.Conv2d(embed_dims, 4, 1)
        self.center2d = nn.Conv2d(embed_dims, 2, 1)


class MLN(nn.Module):
    def __init__(self, c_dim, f_dim=256):
        super().__init__()
        self.reduce = nn.Sequential(nn.Linear(c_dim, f_dim), nn.ReLU())
        self.gamma = nn.Linear(f_dim, f_dim)
        self.beta = nn.Linear(f_dim, f_dim)
        self.ln = nn.LayerNorm(f_dim, elementwise_affine=False)


class SELayerLinear(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv_reduce = nn.Linear(channels, channels)
        self.act1 = nn.ReLU()
        self.conv_expand = nn.Linear(channels, channels)
        self.gate = nn.Sigmoid()


class MmcvMultiheadAttention(nn.Module):
    """mmcv MultiheadAttention: attn = nn.MultiheadAttention, proj_drop, dropout_layer."""

    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(EMBED, 8, 0.1)
        self.proj_drop = nn.Dropout(0.0)
        self.dropout_layer = nn.Dropout(0.1)


class FlashMHA(nn.Module):
    """StreamPETR FlashMHA: in_proj_weight, in_proj_bias (bias=attn_drop=0.1 is truthy), inner_attn, out_proj.

    The dtype=torch.float16 / device='cuda' it is given go only to FlashAttention, which has no
    parameters, so its parameters are float32.
    """

    def __init__(self):
        super().__init__()
        self.in_proj_weight = nn.Parameter(torch.empty(3 * EMBED, EMBED))
        self.in_proj_bias = nn.Parameter(torch.empty(3 * EMBED))
        self.inner_attn = nn.Module()
        self.out_proj = nn.Linear(EMBED, EMBED)


class PETRMultiheadFlashAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = FlashMHA()
        self.proj_drop = nn.Dropout(0.0)
        self.dropout_layer = nn.Dropout(0.1)


class FFN(nn.Module):
    """mmcv FFN(256, 2048, num_fcs=2): activate, layers = [Sequential(Linear, act, Dropout), Linear, Dropout]."""

    def __init__(self):
        super().__init__()
        self.activate = nn.ReLU(inplace=True)
        self.layers = nn.Sequential(nn.Sequential(nn.Linear(EMBED, 2048), self.activate, nn.Dropout(0.1)),
                                    nn.Linear(2048, EMBED), nn.Dropout(0.1))
        self.dropout_layer = nn.Identity()


class PETRTemporalDecoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attentions = nn.ModuleList([MmcvMultiheadAttention(), PETRMultiheadFlashAttention()])
        self.ffns = nn.ModuleList([FFN()])
        self.norms = nn.ModuleList([nn.LayerNorm(EMBED) for _ in range(3)])


class PETRTransformerDecoder(nn.Module):
    def __init__(self, num_layers):
        super().__init__()
        self.layers = nn.ModuleList([PETRTemporalDecoderLayer() for _ in range(num_layers)])
        self.post_norm = nn.LayerNorm(EMBED)


class PETRTemporalTransformer(nn.Module):
    def __init__(self, num_layers):
        super().__init__()
        self.decoder = PETRTransformerDecoder(num_layers)


class StreamPETRHead(nn.Module):
    """Registration order: own Parameters (all requires_grad=False), then the modules of
    _init_layers (first registered by AnchorFreeHead.__init__'s call of self._init_layers(), so
    they precede loss_iou and transformer), then transformer. num_pred is fixed at 6."""

    def __init__(self, decoder_layers, num_query=644, num_propagated=256, num_classes=10, code_size=10,
                 depth_num=64):
        super().__init__()
        self.code_weights = nn.Parameter(torch.tensor([2.0, 2.0] + [1.0] * 8), requires_grad=False)
        self.match_costs = nn.Parameter(torch.tensor([2.0, 2.0] + [1.0] * 8), requires_grad=False)
        self.pc_range = nn.Parameter(torch.tensor([-51.2, -51.2, -5.0, 51.2, 51.2, 3.0]), requires_grad=False)
        self.position_range = nn.Parameter(torch.tensor([-61.2, -61.2, -10.0, 61.2, 61.2, 10.0]), requires_grad=False)
        self.coords_d = nn.Parameter(torch.zeros(depth_num), requires_grad=False)
        fc_cls = nn.Sequential(nn.Linear(EMBED, EMBED), nn.LayerNorm(EMBED), nn.ReLU(inplace=True),
                               nn.Linear(EMBED, EMBED), nn.LayerNorm(EMBED), nn.ReLU(inplace=True),
                               nn.Linear(EMBED, num_classes))
        reg_branch = nn.Sequential(nn.Linear(EMBED, EMBED), nn.ReLU(), nn.Linear(EMBED, EMBED), nn.ReLU(),
                                   nn.Linear(EMBED, code_size))
        self.cls_branches = nn.ModuleList([fc_cls for _ in range(6)])
        self.reg_branches = nn.ModuleList([reg_branch for _ in range(6)])
        self.position_encoder = nn.Sequential(nn.Linear(depth_num * 3, EMBED * 4), nn.ReLU(),
                                              nn.Linear(EMBED * 4, EMBED))
        self.memory_embed = nn.Sequential(nn.Linear(EMBED, EMBED), nn.ReLU(), nn.Linear(EMBED, EMBED))
        self.featurized_pe = SELayerLinear(EMBED)
        self.reference_points = nn.Embedding(num_query, 3)
        self.pseudo_reference_points = nn.Embedding(num_propagated, 3)
        self.query_embedding = nn.Sequential(nn.Linear(EMBED * 3 // 2, EMBED), nn.ReLU(), nn.Linear(EMBED, EMBED))
        self.spatial_alignment = MLN(8)
        self.time_embedding = nn.Sequential(nn.Linear(EMBED, EMBED), nn.LayerNorm(EMBED))
        self.ego_pose_pe = MLN(180)
        self.ego_pose_memory = MLN(180)
        self.transformer = PETRTemporalTransformer(decoder_layers)
        # init_weights() (called by tools/train.py before DDP is built):
        self.pseudo_reference_points.weight.requires_grad = False


class Petr3D(nn.Module):
    """MVXTwoStageDetector registers pts_bbox_head first, then img_backbone, img_neck, img_roi_head;
    Petr3D then adds grid_mask (no tensors)."""

    def __init__(self, decoder_layers):
        super().__init__()
        self.pts_bbox_head = StreamPETRHead(decoder_layers)
        self.img_backbone = ResNet50()
        self.img_neck = CPFPN()
        self.img_roi_head = FocalHead()
        self.grid_mask = nn.Module()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--decoder-layers', type=int, default=6)
    parser.add_argument('--list', action='store_true')
    parser.add_argument('--modules', action='store_true', help='a table per second-level module')
    args = parser.parse_args()
    model = Petr3D(args.decoder_layers)

    params = list(model.named_parameters())  # de-duplicated
    buffers = list(model.named_buffers())
    state = model.state_dict(keep_vars=True)
    param_ids = {id(p): n for n, p in params}
    buffer_ids = {id(b) for _, b in buffers}
    # Every state_dict key of a tensor named_parameters() yields under another name.
    aliases = {}
    for key, t in state.items():
        if id(t) in param_ids and param_ids[id(t)] != key:
            aliases.setdefault(param_ids[id(t)], []).append(key)

    if args.list:
        for key, t in state.items():
            if id(t) in param_ids and param_ids[id(t)] != key:
                continue  # a shared parameter's other key; printed with its first key
            kind = 'parameter' if id(t) in param_ids else ('buffer' if id(t) in buffer_ids else '?')
            dtype = str(t.dtype).replace('torch.', '')
            rg = t.requires_grad if kind == 'parameter' else '-'
            extra = (' shared-with ' + ','.join(aliases[key])) if key in aliases else ''
            print(f'{kind} {key} {list(t.shape)} {dtype} {rg}{extra}')

    trainable = [(n, p) for n, p in params if p.requires_grad]
    frozen = [(n, p) for n, p in params if not p.requires_grad]
    n_all = sum(p.numel() for _, p in params)
    n_train = sum(p.numel() for _, p in trainable)
    n_buf = sum(b.numel() for _, b in buffers)
    buf_fp32 = [(n, b) for n, b in buffers if b.dtype == torch.float32]
    buf_i64 = [(n, b) for n, b in buffers if b.dtype == torch.int64]
    sum_dims = sum(p.dim() for _, p in trainable)
    sum_dims_all = sum(p.dim() for _, p in params)
    state_numel = sum(t.numel() for t in state.values())

    print(f'decoder_layers                      {args.decoder_layers}')
    print(f'state_dict() keys                   {len(state)}')
    print(f'state_dict() elements               {state_numel}')
    print(f'named_parameters() tensors          {len(params)}')
    print(f'  requires_grad (P)                 {len(trainable)}')
    print(f'  frozen                            {len(frozen)}')
    print(f'named_parameters() elements         {n_all}')
    print(f'  trainable elements                {n_train}')
    print(f'  frozen elements                   {n_all - n_train}')
    print(f'parameters fp32 bytes               {4 * n_all}')
    print(f'trainable fp32 bytes                {4 * n_train}')
    print(f'sum of dims, trainable parameters   {sum_dims}')
    print(f'sum of dims, all parameters         {sum_dims_all}')
    print(f'named_buffers() tensors             {len(buffers)} ({len(buf_fp32)} float32, {len(buf_i64)} int64)')
    print(f'named_buffers() elements            {n_buf}')
    print(f'named_buffers() bytes               {sum(b.numel() * b.element_size() for _, b in buffers)}')
    print(f'shared parameters (extra keys)      {sum(len(v) for v in aliases.values())} extra keys for '
          f'{len(aliases)} tensors')
    for prefix in ('pts_bbox_head', 'img_backbone', 'img_neck', 'img_roi_head'):
        ps = [(n, p) for n, p in params if n.startswith(prefix + '.')]
        bs = [(n, b) for n, b in buffers if n.startswith(prefix + '.')]
        print(f'  {prefix:14s} params {len(ps):4d} tensors {sum(p.numel() for _, p in ps):9d} elements, '
              f'trainable {sum(p.numel() for _, p in ps if p.requires_grad):9d} in '
              f'{sum(1 for _, p in ps if p.requires_grad):4d} tensors; buffers {len(bs):4d} tensors '
              f'{sum(b.numel() for _, b in bs):6d} elements')


    if args.modules:
        print_module_table(model, params, buffers)


def print_module_table(model, params, buffers):
    """One row per second-level module (pts_bbox_head.transformer per decoder layer), in
    registration order: parameter tensors / elements, trainable ones, buffer tensors / elements."""
    rows = {}

    def key(name):
        parts = name.split('.')
        if parts[1] == 'transformer':
            return '.'.join(parts[:5]) if parts[3] == 'layers' else '.'.join(parts[:4])
        if parts[1] in ('code_weights', 'match_costs', 'pc_range', 'position_range', 'coords_d'):
            return parts[0] + ' (own: ' + parts[1] + ')'
        return '.'.join(parts[:2])

    for n, p in params:
        r = rows.setdefault(key(n), [0, 0, 0, 0, 0, 0])
        r[0] += 1
        r[1] += p.numel()
        if p.requires_grad:
            r[2] += 1
            r[3] += p.numel()
    for n, b in buffers:
        r = rows.setdefault(key(n), [0, 0, 0, 0, 0, 0])
        r[4] += 1
        r[5] += b.numel()
    print('| module | param tensors | param elements | trainable tensors | trainable elements | '
          'buffer tensors | buffer elements |')
    print('|---|---:|---:|---:|---:|---:|---:|')
    for k, r in rows.items():
        print(f'| {k} | ' + ' | '.join(f'{v:,}' for v in r) + ' |')


if __name__ == '__main__':
    main()
