"""The verdicts over every committed sweep: the paper's claims and the rules that judge them (claims.py), each
comparison measured (evidence.py), the autopilot's checks (autopilot_checks.py) and the tables they make
(claim_tables.py); ``python -m paper.verdicts`` writes them. The per-folder reporter (the rest
of report/) never imports it."""
