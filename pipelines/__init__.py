"""KFP pipelines: wiring of components only (installed as sharebench.pipelines)."""
