class_names = ['car', 'truck']
label2cat = {i: name for i, name in enumerate(class_names)}
