"""What a copy was worth over the committed sweeps (``results/copy_worth.csv``) and the online estimates' pilot
against it (``results/copy_worth_estimates.csv``)."""
