# a learning-rate function
lr_lambda = lambda epoch: 0.1 ** epoch
