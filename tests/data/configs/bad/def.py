# a helper function
def lr_at(epoch):
    return 2e-4 * 0.1 ** epoch
