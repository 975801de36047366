with open('classes.txt') as f:
    class_names = f.read()
