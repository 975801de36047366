pipeline = []
for name in ['LoadImage', 'Normalize']:
    pipeline = pipeline + [dict(type=name)]
