#!/usr/bin/python3
"""Writes a trainval-size mmdet3d / StreamPETR info pickle for bench/import_process.sh.

    /usr/bin/python3 bench/make_import_bench_infos.py OUT.pkl [--frames 34149] [--scenes 850]
        [--boxes 1200000] [--no-2d] [--protocol 2]

The infos have the converter's exact shapes (StreamPETR's nuscenes_converter, dumped by mmcv
with pickle protocol 2): per frame up to 10 lidar sweeps (none at a scene's first frame), 6
cameras with their calibration and intrinsics, the box arrays (gt_boxes N x 7, gt_names,
gt_velocity, num_lidar_pts, num_radar_pts, valid_flag) and, unless --no-2d, StreamPETR's
per-camera 2D annotation lists. Calibration lists are shared between frames of a scene as the
converter shares nuScenes' table records. Values are random (seeded): only the size and shape
matter here. Needs Debian's python3-numpy; about 3 GB of memory and a few minutes.
"""

import argparse
import pickle
import random

import numpy as np

CAMERAS = ['CAM_FRONT', 'CAM_FRONT_RIGHT', 'CAM_FRONT_LEFT', 'CAM_BACK', 'CAM_BACK_LEFT', 'CAM_BACK_RIGHT']
NAMES = ['car', 'truck', 'construction_vehicle', 'bus', 'trailer', 'barrier', 'motorcycle', 'bicycle',
         'pedestrian', 'traffic_cone', 'animal', 'vehicle.emergency.police', 'movable_object.debris']


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('out')
    parser.add_argument('--frames', type=int, default=34149)
    parser.add_argument('--scenes', type=int, default=850)
    parser.add_argument('--boxes', type=int, default=1_200_000)
    parser.add_argument('--no-2d', action='store_true')
    parser.add_argument('--protocol', type=int, default=2)
    args = parser.parse_args()
    rng = random.Random(1)
    nprng = np.random.default_rng(1)

    def token():
        return '%032x' % rng.getrandbits(128)

    def sensor(path, kind, cs, timestamp):
        return {'data_path': './data/nuscenes/' + path, 'type': kind, 'sample_data_token': token(),
                'sensor2ego_translation': cs['translation'], 'sensor2ego_rotation': cs['rotation'],
                'ego2global_translation': [rng.uniform(0, 2000), rng.uniform(0, 2000), 0.0],
                'ego2global_rotation': [rng.random() for _ in range(4)], 'timestamp': timestamp,
                'sensor2lidar_rotation': nprng.random((3, 3)), 'sensor2lidar_translation': nprng.random(3)}

    per_scene = [args.frames // args.scenes + (1 if s < args.frames % args.scenes else 0) for s in range(args.scenes)]
    mean_boxes = args.boxes / args.frames
    infos = []
    for s, frames in enumerate(per_scene):
        scene_token = token()
        log = 'n015-2018-07-24-11-22-45+0800'
        lidar_cs = {'translation': [0.943713, 0.0, 1.84023], 'rotation': [0.7077955, -0.0064, 0.0101, -0.7063]}
        cam_cs = {cam: {'translation': [rng.random() for _ in range(3)], 'rotation': [rng.random() for _ in range(4)],
                        'intrinsic': [[1266.4, 0.0, 816.3], [0.0, 1266.4, 491.5], [0.0, 0.0, 1.0]]} for cam in CAMERAS}
        start = 1532402927647951 + s * 10 ** 9
        sample_tokens = [token() for _ in range(frames)]
        for f in range(frames):
            timestamp = start + f * 500_000
            n = max(0, int(nprng.poisson(mean_boxes)))
            info = {'lidar_path': './data/nuscenes/samples/LIDAR_TOP/%s__LIDAR_TOP__%d.pcd.bin' % (log, timestamp),
                    'token': sample_tokens[f], 'prev': sample_tokens[f - 1] if f else '',
                    'next': sample_tokens[f + 1] if f + 1 < frames else '', 'sweeps': [], 'frame_idx': f,
                    'cams': {}, 'scene_token': scene_token, 'lidar2ego_translation': lidar_cs['translation'],
                    'lidar2ego_rotation': lidar_cs['rotation'],
                    'ego2global_translation': [rng.uniform(0, 2000), rng.uniform(0, 2000), 0.0],
                    'ego2global_rotation': [rng.random() for _ in range(4)], 'timestamp': timestamp}
            for cam in CAMERAS:
                d = sensor('samples/%s/%s__%s__%d.jpg' % (cam, log, cam, timestamp), cam, cam_cs[cam], timestamp)
                d['cam_intrinsic'] = np.array(cam_cs[cam]['intrinsic'])
                info['cams'][cam] = d
            info['sweeps'] = [sensor('sweeps/LIDAR_TOP/%s__LIDAR_TOP__%d.pcd.bin' % (log, timestamp - k * 50_000),
                                     'lidar', lidar_cs, timestamp - k * 50_000)
                              for k in range(1, min(10, 10 * f) + 1)]
            lidar = nprng.integers(0, 300, n) * (nprng.random(n) > 0.19)
            radar = nprng.integers(0, 3, n)
            info['gt_boxes'] = np.concatenate([nprng.uniform(-70, 70, (n, 2)), nprng.random((n, 5))], axis=1)
            info['gt_names'] = np.array([NAMES[i] for i in nprng.integers(0, len(NAMES), n)]) if n else np.array([])
            info['gt_velocity'] = nprng.random((n, 2))
            info['num_lidar_pts'] = lidar
            info['num_radar_pts'] = radar
            info['valid_flag'] = (lidar + radar) > 0
            if not args.no_2d:
                k = n // 6
                info['bboxes2d'] = [nprng.random((k, 4)).astype(np.float32) for _ in CAMERAS]
                info['bboxes3d_cams'] = [nprng.random((k, 7)).astype(np.float32) for _ in CAMERAS]
                info['labels2d'] = [nprng.integers(0, 10, k) for _ in CAMERAS]
                info['centers2d'] = [nprng.random((k, 2)).astype(np.float32) for _ in CAMERAS]
                info['depths'] = [nprng.random(k).astype(np.float32) for _ in CAMERAS]
                info['bboxes_ignore'] = [np.zeros((0, 4), dtype=np.float32) for _ in CAMERAS]
                info['visibilities'] = [[str(rng.randint(1, 4)) for _ in range(k)] for _ in CAMERAS]
            infos.append(info)
    with open(args.out, 'wb') as f:
        pickle.dump({'infos': infos, 'metadata': {'version': 'v1.0-trainval'}}, f, protocol=args.protocol)
    boxes = sum(len(i['gt_boxes']) for i in infos)
    print('wrote %s: %d frames, %d scenes, %d boxes' % (args.out, len(infos), args.scenes, boxes))


if __name__ == '__main__':
    main()
