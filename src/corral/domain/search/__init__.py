"""Hyperparameter search: a training job whose `algorithm.policies.auto_search` asks for
one, run as trials (ordinary training jobs the search owns, kinds/search/).

What is pure lives here: the policy as ModelArts writes it, checked at submit (`spec`), the
algorithms corral offers and their parameters (`algorithms`), the states of a trial and
how a reward is read from a log line (`trials`).
"""
