"""Studies built from several runs (context ablation)."""
