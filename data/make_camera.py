#!/usr/bin/env python3
"""Writes data/camera.npy: scikit-image's `camera` test image (512x512, uint8), the CC0 image that
replaced the classic cameraman in scikit-image, used by study 000's benchmark at 512x512.

    python3 -m pip install scikit-image && python3 data/make_camera.py
"""
from pathlib import Path

import numpy as np
import skimage
from skimage import data

image = data.camera()
assert image.shape == (512, 512) and image.dtype == np.uint8
out = Path(__file__).with_name("camera.npy")
np.save(out, image)
print(f"wrote {out} from scikit-image {skimage.__version__}")
