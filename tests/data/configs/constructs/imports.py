# Imports: their names become values petrsim cannot evaluate (modules leave the config's dict).
import os
import numpy as np
from math import pi as PI
from os.path import join
root = 'data/'
ann_file = os.path.join(root, 'infos.pkl')
mean = np.array([1, 2, 3])
circle = 2 * PI
plain = 5
