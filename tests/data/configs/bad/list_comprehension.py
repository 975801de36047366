classes = ('car', 'truck')
class_names = [
    c for c in classes]
