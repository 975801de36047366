model = dict(
    type='Petr3D',
