"""The operator's own machinery, decided purely: webhook certificates, leader election,
relisting."""
