#!/usr/bin/python3
"""Writes petrsim's SYNTHETIC Argoverse 2 info fixtures (tests/data/importers/) in Far3D's exact shapes:
made-up logs and boxes, shaped after Far3D's converter source (no real Far3D run made them).

Run with Debian's interpreter (python3-numpy and python3-torch), from anywhere:
    /usr/bin/python3 scripts/make_av2_fixtures.py

What it writes:
  mini_av2_infos_train.pkl     3 made-up logs x 6 lidar frames as Far3D's converter writes them
                               (megvii-research/Far3D@5efb9d73 tools/create_infos_av2/
                               create_av2_infos.py): dict(infos=[...], split='train') dumped like
                               mmcv.dump (pickle protocol 2, mmcv 1.x pickle_handler.py:18-23).
                               Per info: scene_id (the log id), lidar_timestamp_ns,
                               city_SE3_ego_lidar_t (an av2 SE3), cam_infos (per ring camera a dict
                               with a PosixPath, SE3 poses, a numpy intrinsics matrix and the
                               distortion as a pandas Series; two of the seven cameras here), gt3d_infos (gt_boxes: a torch float32
                               tensor (N, 7) of x, y, z, l, w, h, yaw; gt_names: a list of str;
                               num_interior_pts: a torch int64 tensor) and gt2d_infos.
                               The third log's second half has no GT after Far3D's filters.
  mini_av2_infos_valid_flag.pkl the same infos with a gt3d_infos['valid_flag'] (numpy bool) that
                               disagrees with num_interior_pts > 0 on some boxes: Far3D reads it with
                               use_valid_flag (argoverse2_dataset.py:198-201); the converter never
                               writes it (this file and bad_av2/ leave cam_infos out: smaller)
  bad_av2/*.pkl                malformed AV2 infos (no gt3d_infos, wrong types, lengths that differ)
  av2_expected.json            what the tests check, computed here independently of petrsim

Torch tensors and pathlib paths are the real ones (torch 1.13 pickles a tensor as Far3D's torch
1.10 does: _rebuild_tensor_v2 of a storage in a legacy torch.save stream). av2 is not installed:
its SE3 is a dataclass of the same module, name and fields, which pickles as the real one does.
pandas is not installed either: the distortion Series is a stand-in of module pandas.core.series,
pickled with NEWOBJ and BUILD as pandas objects are, not byte for byte what pandas 1.5.3 writes
(petrsim never reads it: every pandas object is opaque to the importer).
"""

import dataclasses
import json
import os
import pathlib
import pickle
import sys
import types

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, '..', 'tests', 'data', 'importers')

# Far3D's class_names (projects/configs/far3d.py:15-20): av2's CompetitionCategories.
COMPETITION = ['ARTICULATED_BUS', 'BICYCLE', 'BICYCLIST', 'BOLLARD', 'BOX_TRUCK', 'BUS',
               'CONSTRUCTION_BARREL', 'CONSTRUCTION_CONE', 'DOG', 'LARGE_VEHICLE',
               'MESSAGE_BOARD_TRAILER', 'MOBILE_PEDESTRIAN_CROSSING_SIGN', 'MOTORCYCLE',
               'MOTORCYCLIST', 'PEDESTRIAN', 'REGULAR_VEHICLE', 'SCHOOL_BUS', 'SIGN', 'STOP_SIGN',
               'STROLLER', 'TRUCK', 'TRUCK_CAB', 'VEHICULAR_TRAILER', 'WHEELCHAIR', 'WHEELED_DEVICE',
               'WHEELED_RIDER']
RANGE = 152.4  # far3d.py:10, point_cloud_range x and y
# Two of av2's seven RingCameras, to keep the files small (petrsim never reads cam_infos).
CAMERAS = ['ring_front_center', 'ring_front_left']


def fake_module(name):
    module = types.ModuleType(name)
    sys.modules[name] = module
    return module


# av2.geometry.se3.SE3: a dataclass (rotation, translation), pickled by reference to its module.
for parent in ['av2', 'av2.geometry']:
    fake_module(parent)
se3_module = fake_module('av2.geometry.se3')


@dataclasses.dataclass
class SE3:
    rotation: np.ndarray
    translation: np.ndarray


SE3.__module__ = 'av2.geometry.se3'
se3_module.SE3 = SE3

for parent in ['pandas', 'pandas.core']:
    fake_module(parent)
series_module = fake_module('pandas.core.series')


class Series:
    """Stand-in for pandas.Series (see the module docstring)."""

    def __init__(self, values, index):
        self._mgr = {'values': np.asarray(values, dtype=np.float64), 'index': list(index)}
        self._typ = 'series'
        self.attrs = {}


Series.__module__ = 'pandas.core.series'
series_module.Series = Series


def pose(yaw, x, y):
    c, s = np.cos(yaw), np.sin(yaw)
    return SE3(rotation=np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]]),
               translation=np.array([x, y, 0.0]))


# (log id, first lidar timestamp): log ids sorted as the converter sorts them
# (create_av2_infos.py:43-44); the second log was recorded before the first, so sorting the
# frames by timestamp would move it ahead: Far3D never sorts (argoverse2_dataset.py:94-97).
LOGS = [('0b86f508-5df9-4a46-bc59-5b9536dbde9f', 1_315_350_000_000_000_000),
        ('1f1d0d6f-8b71-3c46-8e3c-d2e5b5d2b2a1', 1_315_340_000_000_000_000),
        ('5c251c22-11b2-3278-835c-0cf3cdee3f44', 1_315_360_000_000_000_000)]
FRAMES_PER_LOG = 6


def boxes_of(log, frame):
    """(name, x, y, num_interior_pts) per box of one frame."""
    if log == 2 and frame >= 3:
        # No GT after the filters: no points, out of range, or not a competition class; one
        # frame without any annotation.
        return [[],
                [('REGULAR_VEHICLE', 12.0, 3.5, 0), ('PEDESTRIAN', 160.25, -4.0, 7)],
                [('ANIMAL', 5.5, 1.25, 20), ('OFFICIAL_SIGNALER', -8.0, 2.0, 3)]][frame - 3]
    boxes = [('REGULAR_VEHICLE', 10.0 + frame, -3.0 + log, 120 + frame),
             ('PEDESTRIAN', -6.5, 4.25 + 0.5 * frame, 15)]
    if frame % 2 == 0:
        boxes.append(('BOLLARD', 20.125, -140.0 - log, 0))  # no points: dropped
    if log == 1:
        boxes.append(('WHEELED_RIDER', -151.5, 30.0, 4))
        boxes.append(('TRUCK', 153.0 + frame, 0.5, 40))  # out of range
    if log == 0 and frame == 5:
        boxes.append(('MESSAGE_BOARD_TRAILER', 0.1, 0.2, 2))
    return boxes


def gt3d(boxes):
    # get_gt3d_data (create_av2_infos.py:134-166): float32 tensor x, y, z, l, w, h then yaw;
    # names a list of str; num_interior_pts an int64 tensor.
    params = torch.as_tensor([[x, y, 0.8, 4.5, 1.9, 1.6] for _, x, y, _ in boxes],
                             dtype=torch.float).reshape(-1, 6)
    yaw = torch.as_tensor([0.1 * i for i in range(len(boxes))], dtype=torch.float).unsqueeze(1)
    return {
        'gt_boxes': torch.cat((params, yaw), dim=-1),
        'gt_names': [name for name, _, _, _ in boxes],
        'num_interior_pts': torch.as_tensor([n for _, _, _, n in boxes], dtype=torch.long),
    }


def make_infos():
    infos = []
    for log_index, (log_id, start) in enumerate(LOGS):
        for frame in range(FRAMES_PER_LOG):
            t = start + frame * 100_000_000
            info = {'scene_id': log_id, 'lidar_timestamp_ns': np.int64(t),
                    'city_SE3_ego_lidar_t': pose(0.01 * frame, 2.0 * frame, 0.0)}
            cam_infos = {}
            for c, cam in enumerate(CAMERAS):
                cam_t = t + 5_000_000 + c
                cam_infos[cam] = dict(
                    fpath=pathlib.PosixPath('train', log_id, 'sensors', 'cameras', cam, f'{cam_t}.jpg'),
                    cam_timestamp_ns=np.int64(cam_t),
                    ego_SE3_cam=pose(0.9 * c, 1.5, 0.0),
                    intrinsics=np.array([[1773.0, 0, 775.0], [0, 1773.0, 1024.0], [0, 0, 1]]),
                    cam_distortion=Series([-0.24, -0.08, 0.1], ['k1', 'k2', 'k3']),
                    city_SE3_ego_cam_t=pose(0.01 * frame, 2.0 * frame + 0.1, 0.0))
            info['cam_infos'] = cam_infos
            boxes = boxes_of(log_index, frame)
            info['gt3d_infos'] = gt3d(boxes)
            info['gt2d_infos'] = {
                'gt_2dbboxes': [np.zeros((0, 4), np.float32)] * len(CAMERAS),
                'gt_2dlabels': [np.zeros((0,), np.int64)] * len(CAMERAS),
                'centers2d': [np.zeros((0, 2), np.float32)] * len(CAMERAS),
                'depths': [np.zeros((0,), np.float32)] * len(CAMERAS)}
            infos.append(info)
    return infos


def dump(data, name):
    path = os.path.join(OUT, name)
    with open(path, 'wb') as f:
        pickle.dump(data, f, protocol=2)  # mmcv.dump's default (pickle_handler.py:22-23)
    return path


# --- expected values, computed independently of petrsim ----------------------------------------

def kept(name, x, y, points, valid, use_valid_flag):
    ok = valid if use_valid_flag else points > 0  # argoverse2_dataset.py:198-201
    x32, y32 = float(np.float32(x)), float(np.float32(y))
    in_range = -RANGE < x32 < RANGE and -RANGE < y32 < RANGE  # ObjectRangeFilter (BEV, open)
    return ok and name in COMPETITION and in_range


def interval_order(n):
    # argoverse2_dataset_t.py:27-31
    order = list(range(n))
    return order[0::5] + order[1::5] + order[2::5] + order[3::5] + order[4::5]


def sequences(scene_ids):
    # argoverse2_dataset_t.py:44-55: a new sequence whenever scene_id changes
    flags, current, last = [], -1, None
    for scene in scene_ids:
        if scene != last:
            last, current = scene, current + 1
        flags.append(current)
    return flags


def split(flags, seq_split_num):
    # argoverse2_dataset_t.py:57-79
    counts = np.bincount(flags)
    new_flags, flag = [], 0
    for count in counts:
        bounds = list(range(0, count, -(-count // seq_split_num))) + [count]
        for length in np.diff(bounds):
            new_flags += [flag] * int(length)
            flag += 1
    return new_flags


def expected_for(infos, interval_test, use_valid_flag, valids=None):
    order = interval_order(len(infos)) if interval_test else list(range(len(infos)))
    frame_gt = []
    for i in order:
        g = infos[i]['gt3d_infos']
        pts = g['num_interior_pts'].tolist()
        boxes = g['gt_boxes'].tolist()
        valid = valids[i] if valids is not None else [p > 0 for p in pts]
        frame_gt.append(sum(kept(name, b[0], b[1], p, v, use_valid_flag)
                            for name, b, p, v in zip(g['gt_names'], boxes, pts, valid)))
    scene_ids = [infos[i]['scene_id'] for i in order]
    flags = sequences(scene_ids)
    groups = split(flags, 2)
    group_gt = {}
    for g, n in zip(groups, frame_gt):
        group_gt[g] = group_gt.get(g, 0) + n
    runs = []
    for k, scene in enumerate(scene_ids):
        if k == 0 or scene != scene_ids[k - 1]:
            runs.append([scene, 0])
        runs[-1][1] += 1
    return {
        'order': order,
        'timestamps': [str(int(infos[i]['lidar_timestamp_ns'])) for i in order],
        'scenes': [r[0] for r in runs],
        'scene_frames': [r[1] for r in runs],
        'frame_gt': frame_gt,
        'boxes': sum(len(infos[i]['gt3d_infos']['gt_names']) for i in order),
        'boxes_kept': sum(frame_gt),
        'groups': len(group_gt),
        'zero_gt_frames': sum(1 for n in frame_gt if n == 0),
        'zero_gt_groups': sum(1 for n in group_gt.values() if n == 0),
    }


def main():
    infos = make_infos()
    dump({'infos': infos, 'split': 'train'}, 'mini_av2_infos_train.pkl')

    # valid_flag: true where num_interior_pts > 0, except two boxes each way.
    valids = []
    for k, info in enumerate(infos):
        pts = info['gt3d_infos']['num_interior_pts'].tolist()
        valid = [p > 0 for p in pts]
        if k == 0 and valid:
            valid[0] = False  # a box with points, flagged invalid
        if k == 16:
            valid[0] = True  # REGULAR_VEHICLE without points, flagged valid
        valids.append(valid)
    flagged = []
    for info, valid in zip(infos, valids):
        copy = {k: v for k, v in info.items() if k != 'cam_infos'}  # small: petrsim never reads it
        copy['gt3d_infos'] = dict(info['gt3d_infos'], valid_flag=np.array(valid, dtype=bool))
        flagged.append(copy)
    dump({'infos': flagged, 'split': 'train'}, 'mini_av2_infos_valid_flag.pkl')

    bad = os.path.join(OUT, 'bad_av2')
    os.makedirs(bad, exist_ok=True)

    def bad_file(name, index, change):
        copy = [{k: (dict(v) if k == 'gt3d_infos' else v) for k, v in info.items() if k != 'cam_infos'}
                for info in infos[:3]]
        change(copy[index])
        dump({'infos': copy, 'split': 'train'}, os.path.join('bad_av2', name))

    def no_gt3d(info):
        del info['gt3d_infos']
    bad_file('no_gt3d_infos.pkl', 2, no_gt3d)  # a test-split info: the converter skips gt3d_infos
    bad_file('boxes_list.pkl', 1, lambda info: info['gt3d_infos'].update(
        gt_boxes=info['gt3d_infos']['gt_boxes'].tolist()))
    bad_file('scene_id_int.pkl', 1, lambda info: info.update(scene_id=7))
    bad_file('names_short.pkl', 0, lambda info: info['gt3d_infos'].update(
        gt_names=info['gt3d_infos']['gt_names'][:-1]))
    bad_file('points_float.pkl', 2, lambda info: info['gt3d_infos'].update(
        num_interior_pts=info['gt3d_infos']['num_interior_pts'].float()))

    expected = {
        'classes': COMPETITION,
        'far3d': expected_for(infos, interval_test=True, use_valid_flag=False),
        'file_order': expected_for(infos, interval_test=False, use_valid_flag=False),
        'valid_flag': expected_for(infos, interval_test=False, use_valid_flag=True, valids=valids),
        'valid_flag_num_interior_pts': expected_for(infos, interval_test=False, use_valid_flag=False),
    }
    with open(os.path.join(OUT, 'av2_expected.json'), 'w') as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write('\n')


if __name__ == '__main__':
    main()
