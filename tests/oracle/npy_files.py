"""Writes .npy files with NumPy for the npy loader's tests. Every array's
values follow from its shape, so the test computes what it must read:

  images.npy      uint8   (6, 3, 4, 5)   (arange * 7) % 256
  floats.npy      float64 (6, 2, 3)      arange / 8 - 2
  inputs_v2.npy   float32 (6, 4)         arange / 3, format version 2.0
  ids.npy         int16   (6, 3)         arange - 5
  labels.npy      int64   (6,)           [3, 0, 2, 1, 2, 0]
  labels_i32.npy  int32   (6,)           the same
  targets.npy     float32 (6,)           arange / 2 (regression targets)
  bad_labels.npy  int64   (6,)           [3, 0, 2, 7, 2, 0]
  short.npy       int64   (5,)           arange
  fortran.npy     float32 (6, 4), Fortran order
  big_endian.npy  >f4     (6, 4)
  scalar.npy      float32 ()
"""
import argparse
import os

import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
args = parser.parse_args()
os.makedirs(args.out, exist_ok=True)


def save(name, array, version=None):
    path = os.path.join(args.out, name)
    if version is None:
        np.save(path, array)
    else:
        with open(path, "wb") as f:
            np.lib.format.write_array(f, array, version=version)


labels = np.array([3, 0, 2, 1, 2, 0])
save("images.npy", ((np.arange(6 * 3 * 4 * 5) * 7) % 256).astype(np.uint8).reshape(6, 3, 4, 5))
save("floats.npy", (np.arange(36) / 8 - 2).reshape(6, 2, 3))
save("inputs_v2.npy", (np.arange(24) / 3).astype(np.float32).reshape(6, 4), version=(2, 0))
save("ids.npy", (np.arange(18) - 5).astype(np.int16).reshape(6, 3))
save("labels.npy", labels.astype(np.int64))
save("labels_i32.npy", labels.astype(np.int32))
save("targets.npy", (np.arange(6) / 2).astype(np.float32))
save("bad_labels.npy", np.array([3, 0, 2, 7, 2, 0], np.int64))
save("short.npy", np.arange(5, dtype=np.int64))
save("fortran.npy", np.asfortranarray(np.arange(24, dtype=np.float32).reshape(6, 4)))
save("big_endian.npy", np.arange(24, dtype=">f4").reshape(6, 4))
save("scalar.npy", np.float32(1.5))
