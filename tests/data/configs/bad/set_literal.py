classes = {'car', 'truck'}
