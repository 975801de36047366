num_epochs = 24
num_epochs += 6
