"""KFP components: thin verb_noun wrappers over the sharebench library (installed as sharebench.components)."""
