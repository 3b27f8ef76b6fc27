"""Extractors that give every token its own binary latent variable z_i, sampled independently
or each given the ones before it (:mod:`.dependent`): HardKuma (:mod:`.hardkuma`, Bastings
et al., 2019) and the Bernoulli variables trained with REINFORCE that it is compared with
(:mod:`.bernoulli`, Lei et al., 2016; Bastings et al., 2019, section 6).
"""
