#!/usr/bin/python3
"""Writes the fixtures of petrsim's importers (tests/data/importers/) with Debian's python3-numpy.

Run with Debian's interpreter, from anywhere:  /usr/bin/python3 scripts/make_import_fixtures.py

What it writes, all from one small made-up nuScenes-like recording (5 scenes, 35 keyframes):
  nuscenes/v1.0-mini/*.json   the nuScenes tables the data comes from (scene, sample,
                              sample_data, ego_pose, calibrated_sensor, sensor, sample_annotation,
                              instance, category), with official v1.0-mini scene names so that
                              `--split mini_train,mini_val` selects them
  mini_infos_train.pkl        the info files StreamPETR's (mmdet3d 1.0's) nuScenes converter
  mini_infos_val.pkl          writes from those tables, in its exact shapes, dumped like mmcv
                              (pickle protocol 2): {'infos': [...], 'metadata': {...}}
  mini_infos_val_p{3,4,5}.pkl the val file again in pickle protocols 3, 4 and 5
  shapes/*.pkl                the val file in the other shapes mmdet3d reads (OrderedDicts, a
                              bare list, scene_name, no num_radar_pts, only valid_flag)
  disagree_infos.pkl          infos whose zero-sweeps scene starts disagree with scene_token
  numpy_values_p{2,3,4,5}.pkl numpy arrays and scalars of every dtype the reader supports
  bad/*.pkl, bad_nuscenes_*/  malformed inputs (truncated, wrong types, missing keys, a pickle
                              that would call os.system, ...); their bytes are written, never
                              loaded
  expected.json               every count the tests check, computed here independently of
                              petrsim: frames, scenes, groups (seq_split_num 2 chunks), frames
                              and groups with zero GT after the filters, GT per scene and per
                              frame, for the default filters and three variants; the numpy values

The converter's behaviour mirrored here (mmdet3d 1.0 tools/data_converter/nuscenes_converter.py,
as extended by StreamPETR): boxes are the sample's annotations in sample_annotation.json order,
their centres moved global -> ego (the LIDAR_TOP keyframe's ego pose) -> lidar (its calibrated
sensor) with the inverse rotations; names mapped by NuScenesDataset.NameMapping (other names kept
as they are); valid_flag = lidar + radar points > 0; sweeps = up to 10 previous LIDAR_TOP
sample_data; infos in sample.json order, split by scene. StreamPETR then sorts by timestamp and
starts a scene at every frame without sweeps.
"""

import collections
import json
import math
import os
import pickle
import random
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, '..', 'tests', 'data', 'importers')

CLASSES = ['car', 'truck', 'construction_vehicle', 'bus', 'trailer', 'barrier', 'motorcycle',
           'bicycle', 'pedestrian', 'traffic_cone']
NAME_MAPPING = {
    'movable_object.barrier': 'barrier', 'vehicle.bicycle': 'bicycle', 'vehicle.bus.bendy': 'bus',
    'vehicle.bus.rigid': 'bus', 'vehicle.car': 'car', 'vehicle.construction': 'construction_vehicle',
    'vehicle.motorcycle': 'motorcycle', 'human.pedestrian.adult': 'pedestrian',
    'human.pedestrian.child': 'pedestrian', 'human.pedestrian.construction_worker': 'pedestrian',
    'human.pedestrian.police_officer': 'pedestrian', 'movable_object.trafficcone': 'traffic_cone',
    'vehicle.trailer': 'trailer', 'vehicle.truck': 'truck'}
CATEGORIES = sorted(NAME_MAPPING) + ['animal', 'vehicle.emergency.police', 'movable_object.debris',
                                     'static_object.bicycle_rack']
KNOWN = sorted(NAME_MAPPING)
UNKNOWN = ['animal', 'vehicle.emergency.police', 'movable_object.debris', 'static_object.bicycle_rack']
CAMERAS = ['CAM_FRONT', 'CAM_FRONT_RIGHT', 'CAM_FRONT_LEFT', 'CAM_BACK', 'CAM_BACK_LEFT', 'CAM_BACK_RIGHT']

rng = random.Random(20240607)


def token():
    return '%032x' % rng.getrandbits(128)


# --- geometry, as pyquaternion computes it ------------------------------------------------------

def quat_to_matrix(q):
    w, x, y, z = np.array(q, dtype=np.float64) / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def yaw_quat(yaw, tilt=0.0):
    """A unit quaternion (w, x, y, z): yaw about z, then a small tilt about x."""
    qz = np.array([math.cos(yaw / 2), 0, 0, math.sin(yaw / 2)])
    qx = np.array([math.cos(tilt / 2), math.sin(tilt / 2), 0, 0])
    w1, x1, y1, z1 = qz
    w2, x2, y2, z2 = qx
    return [w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2]


# --- the recording --------------------------------------------------------------------------------
# Each scene: (name, split, frames); each frame is a list of boxes (lidar-frame x, y, category,
# lidar points, radar points) or 'empty' (no annotation at all).

def box(x, y, cat='vehicle.car', lidar=5, radar=0):
    return (x, y, cat, lidar, radar)


def random_boxes(n):
    out = []
    for _ in range(n):
        cat = rng.choice(KNOWN) if rng.random() < 0.85 else rng.choice(UNKNOWN)
        lidar = 0 if rng.random() < 0.2 else rng.randint(1, 300)
        radar = rng.choice([0, 0, 0, 1, 2])
        out.append(box(rng.uniform(-70, 70), rng.uniform(-70, 70), cat, lidar, radar))
    return out


SCENES = [
    # A normal scene, 8 frames.
    ('scene-0061', 'mini_train', [random_boxes(rng.randint(3, 9)) for _ in range(8)]),
    # 7 frames; its second seq_split_num=2 chunk (frames 4-6) keeps no box after the filters:
    # no annotation, then only boxes without points, then unknown classes and out-of-range boxes.
    ('scene-0553', 'mini_train', [random_boxes(5) + [box(10, 10)] for _ in range(4)] + [
        'empty',
        [box(3, 4, lidar=0, radar=0), box(-8, 2, 'human.pedestrian.adult', lidar=0, radar=0)],
        [box(1, 1, 'animal', 30, 2), box(51.2, 0, 'vehicle.car', 40), box(0, -51.2, 'vehicle.truck', 7),
         box(60, 60, 'vehicle.bus.rigid', 9), box(2, 2, 'movable_object.debris', 3)]]),
    # 6 frames with an empty frame in the middle and boxes right at the range's edges.
    ('scene-0655', 'mini_train', [
        random_boxes(4), random_boxes(6), 'empty',
        [box(51.19, -51.19, 'movable_object.barrier', 2), box(-51.2, 3, 'vehicle.car', 3),
         box(51.2000001, 0, 'vehicle.car', 3), box(-51.1999, 0, 'vehicle.trailer', 1)],
        random_boxes(3), [box(0, 0, 'vehicle.bicycle', 0, 3)]]),
    # 9 frames: radar-only boxes (valid only with use_valid_flag) and lidar-only boxes.
    ('scene-0103', 'mini_val', [
        [box(5, 5, 'vehicle.car', 0, 2)], [box(5, 6, 'vehicle.car', 0, 1), box(7, 7, 'human.pedestrian.child', 4, 0)],
        random_boxes(5), random_boxes(2), [box(-20, 20, 'vehicle.motorcycle', 0, 1)],
        random_boxes(7), random_boxes(1), random_boxes(4), random_boxes(6)]),
    # 5 frames whose first chunk (frames 0-2) keeps nothing: a zero-GT group in val.
    ('scene-0916', 'mini_val', [
        'empty', [box(100, 0, 'vehicle.car', 10)], [box(1, 1, 'static_object.bicycle_rack', 10, 0)],
        random_boxes(6), random_boxes(2)]),
]

SWEEPS_BETWEEN_KEYFRAMES = 2
MAX_SWEEPS = 10


def build_tables():
    """The nuScenes tables; returns them and, per sample, what the converter needs."""
    t = {name: [] for name in ['category', 'instance', 'sensor', 'calibrated_sensor', 'scene', 'sample',
                               'sample_data', 'ego_pose', 'sample_annotation']}
    category_token = {}
    for name in CATEGORIES:
        category_token[name] = token()
        t['category'].append({'token': category_token[name], 'name': name, 'description': name + ' (fixture)'})
    sensor_token = {}
    for channel, modality in [('LIDAR_TOP', 'lidar'), ('CAM_FRONT', 'camera'), ('RADAR_FRONT', 'radar')]:
        sensor_token[channel] = token()
        t['sensor'].append({'token': sensor_token[channel], 'channel': channel, 'modality': modality})
    samples = []  # in creation order; sample.json is written shuffled
    base_time = 1532402927647951
    for scene_index, (scene_name, split, frames) in enumerate(SCENES):
        scene_token = token()
        # Each scene has its own lidar calibration (as each log has), rotated like nuScenes'.
        lidar_cs = {'token': token(), 'sensor_token': sensor_token['LIDAR_TOP'],
                    'translation': [0.943713, 0.0, 1.84023],
                    'rotation': yaw_quat(-math.pi / 2 + 0.01 * scene_index, 0.002), 'camera_intrinsic': []}
        cam_cs = {'token': token(), 'sensor_token': sensor_token['CAM_FRONT'],
                  'translation': [1.70079, 0.0159, 1.51095], 'rotation': yaw_quat(-math.pi / 2, -math.pi / 2),
                  'camera_intrinsic': [[1266.4, 0.0, 816.3], [0.0, 1266.4, 491.5], [0.0, 0.0, 1.0]]}
        t['calibrated_sensor'] += [lidar_cs, cam_cs]
        # Scenes overlap nothing in time; within a scene keyframes are 0.5 s apart.
        start = base_time + scene_index * 100_000_000
        sample_tokens = [token() for _ in frames]
        lidar_prev = ''
        sweep_count = 0
        for f, frame in enumerate(frames):
            timestamp = start + f * 500_000
            # Lidar sweeps before this keyframe (none before the first one of the scene).
            if f > 0:
                for k in range(SWEEPS_BETWEEN_KEYFRAMES):
                    sd = sample_data_record(t, lidar_cs, timestamp - 150_000 + k * 50_000, False,
                                            sample_tokens[f], lidar_prev, 'sweeps/LIDAR_TOP')
                    lidar_prev = sd['token']
                    sweep_count += 1
            keyframe = sample_data_record(t, lidar_cs, timestamp, True, sample_tokens[f], lidar_prev,
                                          'samples/LIDAR_TOP')
            sweeps = min(MAX_SWEEPS, sweep_count + f)  # earlier keyframes are sweeps too
            lidar_prev = keyframe['token']
            camera = sample_data_record(t, cam_cs, timestamp + 12_000, True, sample_tokens[f], '',
                                        'samples/CAM_FRONT')
            pose = next(p for p in t['ego_pose'] if p['token'] == keyframe['ego_pose_token'])
            sample = {'token': sample_tokens[f], 'timestamp': timestamp,
                      'prev': sample_tokens[f - 1] if f > 0 else '',
                      'next': sample_tokens[f + 1] if f + 1 < len(frames) else '', 'scene_token': scene_token}
            t['sample'].append(sample)
            anns = []
            for (x, y, cat, lidar, radar) in ([] if frame == 'empty' else frame):
                z = rng.uniform(-1.5, 0.5)
                # Lidar frame -> ego -> global: the annotation stores the global centre.
                ego = quat_to_matrix(lidar_cs['rotation']) @ np.array([x, y, z]) + np.array(lidar_cs['translation'])
                glob = quat_to_matrix(pose['rotation']) @ ego + np.array(pose['translation'])
                instance = {'token': token(), 'category_token': category_token[cat], 'nbr_annotations': 1,
                            'first_annotation_token': '', 'last_annotation_token': ''}
                ann = {'token': token(), 'sample_token': sample['token'], 'instance_token': instance['token'],
                       'visibility_token': str(rng.randint(1, 4)), 'attribute_tokens': [],
                       'translation': [float(v) for v in glob],
                       'size': [rng.uniform(0.5, 3), rng.uniform(0.5, 6), rng.uniform(1, 3)],
                       'rotation': yaw_quat(rng.uniform(-3, 3)), 'prev': '', 'next': '',
                       'num_lidar_pts': lidar, 'num_radar_pts': radar}
                instance['first_annotation_token'] = instance['last_annotation_token'] = ann['token']
                t['instance'].append(instance)
                anns.append(ann)
            samples.append({'sample': sample, 'anns': anns, 'scene_name': scene_name, 'split': split,
                            'lidar_sd': keyframe, 'lidar_cs': lidar_cs, 'pose': pose, 'sweeps': sweeps,
                            'camera_sd': camera, 'camera_cs': cam_cs})
        t['scene'].append({'token': scene_token, 'log_token': token(), 'nbr_samples': len(frames),
                           'first_sample_token': sample_tokens[0], 'last_sample_token': sample_tokens[-1],
                           'name': scene_name, 'description': 'fixture scene'})
    # Annotations are stored interleaved across samples (as in nuScenes, not grouped by sample):
    # the converter keeps sample_annotation.json order within each sample.
    all_anns = [a for s in samples for a in s['anns']]
    rng.shuffle(all_anns)
    t['sample_annotation'] = all_anns
    for s in samples:
        order = {a['token']: i for i, a in enumerate(all_anns)}
        s['anns'].sort(key=lambda a: order[a['token']])
    # sample.json is not in time order in nuScenes either: the converter keeps table order and
    # StreamPETR sorts by timestamp.
    rng.shuffle(t['sample'])
    order = {s['token']: i for i, s in enumerate(t['sample'])}
    samples.sort(key=lambda s: order[s['sample']['token']])
    rng.shuffle(t['sample_data'])
    rng.shuffle(t['ego_pose'])
    return t, samples


def sample_data_record(t, cs, timestamp, key_frame, sample_token, prev, folder):
    pose = {'token': token(), 'timestamp': timestamp,
            'rotation': yaw_quat(rng.uniform(-math.pi, math.pi)),
            'translation': [rng.uniform(300, 2000), rng.uniform(300, 2000), 0.0]}
    t['ego_pose'].append(pose)
    sd = {'token': token(), 'sample_token': sample_token, 'ego_pose_token': pose['token'],
          'calibrated_sensor_token': cs['token'], 'timestamp': timestamp, 'fileformat': 'pcd',
          'is_key_frame': key_frame, 'height': 0, 'width': 0,
          'filename': '%s/n015-2018-07-24-11-22-45+0800__%d.pcd.bin' % (folder, timestamp),
          'prev': prev, 'next': ''}
    if prev:
        next(r for r in t['sample_data'] if r['token'] == prev)['next'] = sd['token']
    t['sample_data'].append(sd)
    return sd


def sensor_dict(sd, cs, pose, kind):
    """obtain_sensor2top's dict (the values are made up but shaped like the converter's)."""
    r = quat_to_matrix(cs['rotation'])
    return {'data_path': './data/nuscenes/' + sd['filename'], 'type': kind, 'sample_data_token': sd['token'],
            'sensor2ego_translation': cs['translation'], 'sensor2ego_rotation': cs['rotation'],
            'ego2global_translation': pose['translation'], 'ego2global_rotation': pose['rotation'],
            'timestamp': sd['timestamp'], 'sensor2lidar_rotation': r.T.copy(),
            'sensor2lidar_translation': np.array(cs['translation']) * 0.5}


def converter_info(s, frame_idx):
    """One info as StreamPETR's nuscenes_converter._fill_trainval_infos writes it."""
    sample, sd, cs, pose = s['sample'], s['lidar_sd'], s['lidar_cs'], s['pose']
    info = {'lidar_path': './data/nuscenes/' + sd['filename'], 'token': sample['token'], 'prev': sample['prev'],
            'next': sample['next'], 'sweeps': [], 'frame_idx': frame_idx, 'cams': dict(),
            'scene_token': sample['scene_token'], 'lidar2ego_translation': cs['translation'],
            'lidar2ego_rotation': cs['rotation'], 'ego2global_translation': pose['translation'],
            'ego2global_rotation': pose['rotation'], 'timestamp': sample['timestamp']}
    for cam in CAMERAS:
        cam_info = sensor_dict(s['camera_sd'], s['camera_cs'], pose, cam)
        cam_info.update(cam_intrinsic=np.array(s['camera_cs']['camera_intrinsic']))
        info['cams'].update({cam: cam_info})
    info['sweeps'] = [sensor_dict(sd, cs, pose, 'lidar') for _ in range(s['sweeps'])]
    anns = s['anns']
    # Box centres global -> ego -> lidar, as nusc.get_sample_data does (translate, rotate by the
    # inverse quaternion).
    r_pose, r_cs = quat_to_matrix(pose['rotation']), quat_to_matrix(cs['rotation'])
    locs = []
    for a in anns:
        c = np.array(a['translation'], dtype=np.float64)
        c = r_pose.T @ (c - np.array(pose['translation']))
        c = r_cs.T @ (c - np.array(cs['translation']))
        locs.append(c)
    locs = np.array(locs).reshape(-1, 3)
    dims = np.array([a['size'] for a in anns]).reshape(-1, 3)
    rots = np.array([0.3 for _ in anns]).reshape(-1, 1)
    velocity = np.array([[0.5, -0.25] for _ in anns])
    valid_flag = np.array([(a['num_lidar_pts'] + a['num_radar_pts']) > 0 for a in anns], dtype=bool).reshape(-1)
    names = [category_of(a) for a in anns]
    for i in range(len(names)):
        if names[i] in NAME_MAPPING:
            names[i] = NAME_MAPPING[names[i]]
    names = np.array(names)
    gt_boxes = np.concatenate([locs, dims[:, [1, 0, 2]], rots], axis=1)
    info['gt_boxes'] = gt_boxes
    info['gt_names'] = names
    info['gt_velocity'] = velocity.reshape(-1, 2)
    info['num_lidar_pts'] = np.array([a['num_lidar_pts'] for a in anns])
    info['num_radar_pts'] = np.array([a['num_radar_pts'] for a in anns])
    info['valid_flag'] = valid_flag
    # StreamPETR's per-camera 2D annotations: lists of (possibly empty) arrays.
    info['bboxes2d'] = [np.zeros((len(anns) % 3, 4), dtype=np.float32) for _ in CAMERAS]
    info['labels2d'] = [np.zeros(len(anns) % 3, dtype=np.int64) for _ in CAMERAS]
    info['visibilities'] = [['4'] * (len(anns) % 3) for _ in CAMERAS]
    return info


CATEGORY_OF_INSTANCE = {}


def category_of(ann):
    return CATEGORY_OF_INSTANCE[ann['instance_token']]


def dump(path, obj, protocol=2):
    with open(path, 'wb') as f:
        f.write(pickle.dumps(obj, protocol=protocol))


# --- expected values, computed independently of petrsim ----------------------------------------

def float32_in_range(v, lo, hi):
    return bool(np.float32(v) > np.float32(lo)) and bool(np.float32(v) < np.float32(hi))


def gt_count(info, classes, lo, hi, use_valid_flag):
    """mmdet3d's three filters on one info (get_ann_info + ObjectNameFilter + ObjectRangeFilter)."""
    n = 0
    for i in range(len(info['gt_boxes'])):
        valid = bool(info['valid_flag'][i]) if use_valid_flag else info['num_lidar_pts'][i] > 0
        x, y = info['gt_boxes'][i][0], info['gt_boxes'][i][1]
        if valid and str(info['gt_names'][i]) in classes and float32_in_range(x, lo, hi) \
                and float32_in_range(y, lo, hi):
            n += 1
    return n


def chunk_lengths(n, split):
    step = math.ceil(n / split)
    bounds = list(range(0, n, step)) + [n]
    return [b - a for a, b in zip(bounds[:-1], bounds[1:])]


def expected_subdataset(name, infos, classes, lo, hi, use_valid_flag):
    infos = sorted(infos, key=lambda e: e['timestamp'])  # StreamPETR's load_annotations
    scenes = []
    for k, info in enumerate(infos):
        if k == 0 or len(info['sweeps']) == 0:
            scenes.append([])
        scenes[-1].append(gt_count(info, classes, lo, hi, use_valid_flag))
    groups = zero_groups = 0
    for frames in scenes:
        at = 0
        for length in chunk_lengths(len(frames), 2):
            groups += 1
            zero_groups += all(g == 0 for g in frames[at:at + length])
            at += length
    return {'name': name, 'frames': len(infos), 'scenes': len(scenes), 'groups': groups,
            'zero_gt_frames': sum(1 for frames in scenes for g in frames if g == 0),
            'zero_gt_groups': zero_groups, 'scene_frames': [len(f) for f in scenes],
            'scene_gt': [sum(f) for f in scenes], 'frame_gt': scenes,
            'boxes': sum(len(i['gt_boxes']) for i in infos),
            'tokens': [i['token'] for i in infos]}


def expected_all(files, classes, lo, hi, use_valid_flag):
    subs = [expected_subdataset(name, infos, classes, lo, hi, use_valid_flag) for name, infos in files]
    total = {key: sum(s[key] for s in subs) for key in ['frames', 'scenes', 'groups', 'zero_gt_frames',
                                                         'zero_gt_groups', 'boxes']}
    return {'subdatasets': subs, 'total': total}


# --- numpy values for the reader's unit tests ----------------------------------------------------

def numpy_values():
    fortran = np.asfortranarray(np.arange(6, dtype=np.float64).reshape(2, 3) + 0.5)
    return {
        'f8': np.array([[1.5, -2.25, 3.0], [4.0, 5.5, -6.0]]),
        'f4': np.array([0.1, 2.5, -3.75], dtype=np.float32),
        'i8': np.array([1, -2, 3000000000000], dtype=np.int64),
        'i4': np.array([-7, 8], dtype=np.int32),
        'u1': np.array([0, 255], dtype=np.uint8),
        'b1': np.array([True, False, True]),
        'U': np.array(['car', 'pedestrian', 'caf\u00e9']),
        'S': np.array([b'ab', b'c']),
        'O': np.array([np.array([1.0, 2.0]), 'x', 3], dtype=object),
        'empty_f8': np.array([]),
        'empty_boxes': np.zeros((0, 7)),
        'fortran': fortran,
        'scalar_f8': np.float64(2.5),
        'scalar_i8': np.int64(-9),
        'scalar_b': np.bool_(True),
        'three_d': np.arange(24, dtype=np.int16).reshape(2, 3, 4),
        'big': np.arange(300, dtype=np.float64) * 0.25,  # > 255 bytes of latin-1 in protocol 2
    }


def numpy_expected():
    return {
        'f8': {'dtype': 'float64', 'shape': [2, 3], 'values': [1.5, -2.25, 3.0, 4.0, 5.5, -6.0]},
        'f4': {'dtype': 'float32', 'shape': [3], 'values': [float(np.float32(v)) for v in [0.1, 2.5, -3.75]]},
        'i8': {'dtype': 'int64', 'shape': [3], 'values': [1, -2, 3000000000000]},
        'i4': {'dtype': 'int32', 'shape': [2], 'values': [-7, 8]},
        'u1': {'dtype': 'uint8', 'shape': [2], 'values': [0, 255]},
        'b1': {'dtype': 'bool', 'shape': [3], 'values': [1, 0, 1]},
        'U': {'dtype': 'str', 'shape': [3], 'values': ['car', 'pedestrian', 'caf\u00e9']},
        'S': {'dtype': 'bytes', 'shape': [2], 'values': ['ab', 'c']},
        'empty_f8': {'dtype': 'float64', 'shape': [0], 'values': []},
        'empty_boxes': {'dtype': 'float64', 'shape': [0, 7], 'values': []},
        'fortran': {'dtype': 'float64', 'shape': [2, 3], 'values': [0.5, 1.5, 2.5, 3.5, 4.5, 5.5]},
        'three_d': {'dtype': 'int16', 'shape': [2, 3, 4], 'values': list(range(24))},
        'big': {'dtype': 'float64', 'shape': [300], 'values': [i * 0.25 for i in range(300)]},
    }


# --- malformed inputs ----------------------------------------------------------------------------

class CallsSystem:
    """Pickles as a call of os.system; pickling only names the function, nothing runs."""

    def __reduce__(self):
        return (os.system, ('echo petrsim-fixture-should-never-run',))


def slim(info):
    """An info without its camera and sweep details (small files for the error cases)."""
    return dict(info, cams={}, sweeps=[{'timestamp': s['timestamp']} for s in info['sweeps']],
                bboxes2d=[], labels2d=[], visibilities=[])


def write_bad(good_infos):
    bad = os.path.join(OUT, 'bad')
    os.makedirs(bad)
    good_infos = [slim(i) for i in good_infos[:4]]
    good = pickle.dumps({'infos': good_infos, 'metadata': {'version': 'v1.0-mini'}}, protocol=2)
    with open(os.path.join(bad, 'truncated.pkl'), 'wb') as f:
        f.write(good[:len(good) * 2 // 3])
    with open(os.path.join(bad, 'empty.pkl'), 'wb') as f:
        pass
    with open(os.path.join(bad, 'not_a_pickle.pkl'), 'wb') as f:
        f.write(b'{"infos": []}\n')

    def variant(name, change, index=1):
        infos = [dict(i) for i in good_infos]
        change(infos[index])
        dump(os.path.join(bad, name), {'infos': infos, 'metadata': {'version': 'v1.0-mini'}})

    variant('timestamp_str.pkl', lambda i: i.update(timestamp=str(i['timestamp'])))
    variant('no_sweeps.pkl', lambda i: i.pop('sweeps'), index=2)
    variant('boxes_3_columns.pkl', lambda i: i.update(gt_boxes=i['gt_boxes'][:, :3]), index=0)
    variant('names_short.pkl', lambda i: i.update(gt_names=i['gt_names'][:-1]), index=0)
    variant('lidar_pts_float.pkl', lambda i: i.update(num_lidar_pts=i['num_lidar_pts'].astype(np.float64)),
            index=0)
    variant('no_gt.pkl', lambda i: [i.pop(k) for k in ['gt_boxes', 'gt_names', 'gt_velocity', 'num_lidar_pts',
                                                       'num_radar_pts', 'valid_flag']], index=0)
    dump(os.path.join(bad, 'infos_not_list.pkl'), {'infos': {'a': 1}, 'metadata': {}})
    dump(os.path.join(bad, 'data_list.pkl'), {'metainfo': {'dataset': 'nuscenes'},
                                               'data_list': [{'sample_idx': 0, 'token': 'x', 'instances': []}]})
    # Code: os.system through __reduce__ (GLOBAL 'posix system' in protocol 2), and builtins.eval
    # through STACK_GLOBAL in protocol 4, written by hand. Neither is ever unpickled here.
    dump(os.path.join(bad, 'calls_system.pkl'), {'infos': [CallsSystem()], 'metadata': {}})
    evil = b'\x80\x04\x95\x1c\x00\x00\x00\x00\x00\x00\x00\x8c\x08builtins\x94\x8c\x04eval\x94\x93\x94' \
           b'\x8c\x041+1\x94\x85\x94R\x94.'
    with open(os.path.join(bad, 'calls_eval.pkl'), 'wb') as f:
        f.write(evil)
    # An array whose shape disagrees with its data (hand-edited state): 2x7 float64 with 8 bytes.
    arr = pickle.dumps(np.zeros((1, 1)), protocol=2)
    assert arr.count(b'K\x01K\x01\x86') == 1
    bad_shape = arr.replace(b'K\x01K\x01\x86', b'K\x02K\x07\x86')
    with open(os.path.join(bad, 'array_shape_mismatch.pkl'), 'wb') as f:
        f.write(bad_shape)


def write_shapes(val, scene_names, metadata):
    """The val file in the other shapes mmdet3d reads (shapes/): the dicts as OrderedDicts, the older
    format's bare list of infos, infos naming their scene (scene_name, as BEVDet's converter stores
    it), infos without num_radar_pts, and infos with only the stored valid_flag (no point counts:
    mmdet3d reads num_lidar_pts only with use_valid_flag=False). pickle writes each as Python does."""
    shapes = os.path.join(OUT, 'shapes')
    os.makedirs(shapes)
    ordered = collections.OrderedDict([('infos', [collections.OrderedDict(i) for i in val]),
                                       ('metadata', collections.OrderedDict(metadata))])
    dump(os.path.join(shapes, 'ordered_dict.pkl'), ordered)
    dump(os.path.join(shapes, 'bare_list.pkl'), val)
    named = [dict(i, scene_name=name) for i, name in zip(val, scene_names)]
    dump(os.path.join(shapes, 'scene_name.pkl'), {'infos': named, 'metadata': metadata})
    no_radar = [{k: v for k, v in i.items() if k != 'num_radar_pts'} for i in val]
    dump(os.path.join(shapes, 'no_radar.pkl'), {'infos': no_radar, 'metadata': metadata})
    flag_only = [{k: v for k, v in i.items() if k not in ('num_lidar_pts', 'num_radar_pts')} for i in val]
    dump(os.path.join(shapes, 'flag_only.pkl'), {'infos': flag_only, 'metadata': metadata})


def write_bad_nuscenes(tables):
    """Table sets with one defect each (only the tables up to the broken one are needed)."""
    order = ['category', 'instance', 'sensor', 'calibrated_sensor', 'scene', 'sample', 'sample_data',
             'ego_pose', 'sample_annotation']

    def table_set(name, tables_changed, upto):
        d = os.path.join(OUT, name, 'v1.0-mini')
        os.makedirs(d)
        for t in order[:order.index(upto) + 1]:
            content = tables_changed.get(t, tables[t])
            with open(os.path.join(d, t + '.json'), 'w') as f:
                if isinstance(content, str):
                    f.write(content)
                else:
                    json.dump(content, f, separators=(',', ':'))

    table_set('bad_nuscenes_missing_table', {}, 'scene')  # no sample.json
    text = json.dumps(tables['sample'], separators=(',', ':'))
    table_set('bad_nuscenes_broken_json', {'sample': text[:len(text) // 2]}, 'sample')
    anns = [dict(a) for a in tables['sample_annotation']]
    anns[3]['translation'] = anns[3]['translation'][:2]
    table_set('bad_nuscenes_translation', {'sample_annotation': anns}, 'sample_annotation')


def main():
    if os.path.exists(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    tables, samples = build_tables()
    for inst in tables['instance']:
        CATEGORY_OF_INSTANCE[inst['token']] = next(c['name'] for c in tables['category']
                                                   if c['token'] == inst['category_token'])
    nus = os.path.join(OUT, 'nuscenes', 'v1.0-mini')
    os.makedirs(nus)
    for name, rows in tables.items():
        with open(os.path.join(nus, name + '.json'), 'w') as f:
            json.dump(rows, f, indent=0)

    # The converter: infos in sample.json order, frame_idx running over that order.
    train, val = [], []
    frame_idx = 0
    for s in samples:
        info = converter_info(s, frame_idx)
        frame_idx = 0 if s['sample']['next'] == '' else frame_idx + 1
        (train if s['split'] == 'mini_train' else val).append(info)
    metadata = {'version': 'v1.0-mini'}
    dump(os.path.join(OUT, 'mini_infos_train.pkl'), {'infos': train, 'metadata': metadata})
    dump(os.path.join(OUT, 'mini_infos_val.pkl'), {'infos': val, 'metadata': metadata})
    for protocol in (3, 4, 5):
        dump(os.path.join(OUT, 'mini_infos_val_p%d.pkl' % protocol), {'infos': val, 'metadata': metadata}, protocol)
    write_shapes(val, [s['scene_name'] for s in samples if s['split'] != 'mini_train'], metadata)

    # Zero-sweeps starts that disagree with scene_token: frame 3 of the first scene loses its
    # sweeps (a new scene starts there for StreamPETR), the second scene's first frame keeps
    # some (StreamPETR merges it into the first scene), and a last frame without sweeps but with
    # the same scene_token makes a scene of one frame, which seq_split_num 2 cannot cut in two.
    disagree = sorted([slim(i) for i in train], key=lambda e: e['timestamp'])
    disagree = [i for i in disagree if i['scene_token'] in {disagree[0]['scene_token'], disagree[-1]['scene_token']}]
    disagree[3]['sweeps'] = []
    first_of_second = next(k for k, i in enumerate(disagree) if i['scene_token'] == disagree[-1]['scene_token'])
    disagree[first_of_second]['sweeps'] = disagree[first_of_second - 1]['sweeps'][:2]
    disagree.append(dict(disagree[-1], token='f' * 32, timestamp=disagree[-1]['timestamp'] + 500_000, sweeps=[]))
    dump(os.path.join(OUT, 'disagree_infos.pkl'), {'infos': disagree, 'metadata': metadata})

    values = numpy_values()
    for protocol in (2, 3, 4, 5):
        dump(os.path.join(OUT, 'numpy_values_p%d.pkl' % protocol), values, protocol)

    write_bad(train)
    write_bad_nuscenes(tables)

    nus_classes = CLASSES
    files = [('mini_infos_train', train), ('mini_infos_val', val)]
    expected = {
        'default': expected_all(files, nus_classes, -51.2, 51.2, True),
        'no_valid_flag': expected_all(files, nus_classes, -51.2, 51.2, False),
        'classes_car_pedestrian': expected_all(files, ['car', 'pedestrian'], -51.2, 51.2, True),
        'range_30': expected_all(files, nus_classes, -30.0, 30.0, True),
        'disagree': expected_all([('disagree_infos', disagree)], nus_classes, -51.2, 51.2, True),
        'disagree_warnings': 3,
        'numpy_values': numpy_expected(),
    }
    # The disagreements, counted the way the importer reports them: a frame where the
    # zero-sweeps rule and a scene_token change disagree.
    d = sorted(disagree, key=lambda e: e['timestamp'])
    expected['disagree_warnings'] = sum(
        1 for k in range(1, len(d))
        if (len(d[k]['sweeps']) == 0) != (d[k]['scene_token'] != d[k - 1]['scene_token']))
    with open(os.path.join(OUT, 'expected.json'), 'w') as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write('\n')
    print('wrote', OUT)
    for k in ['default', 'no_valid_flag', 'classes_car_pedestrian', 'range_30', 'disagree']:
        print(k, expected[k]['total'])


if __name__ == '__main__':
    if not sys.executable.startswith('/usr/bin/'):
        sys.exit('run with Debian\'s /usr/bin/python3 (python3-numpy)')
    main()
