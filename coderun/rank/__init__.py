"""Ranking a finished run's samples without the oracle (issue 24, CodeT in project context): `coderun rank`.

One module per stage, in the order data flows, beside the two they share:

    records     the typed records the stages pass and the run keeps (reports read them: rank is below report)
    store       rank's own tables in the run's run.sqlite, on the run store's connection

    execute     every distinct sample of a task run in the sandbox on the task's inputs (`--tests inputs`) or
                against tests the model wrote (`--tests model`); deduplicated, cached in the run store
    generate    `--tests model`: test cases asked of the model, parsed and kept in the run store
    cluster     samples grouped by identical behaviour and scored (pure)
    metrics     ranked pass@1 beside pass@1 and pass@10, with a paired bootstrap interval for the lift (pure)
    summary     the lift table and its notes, as `coderun rank`, RUN/rank/summary-T.md and reports show them
    output      RUN/rank/ (ranking-T.json, summary-T.md, ranked-T.jsonl) and the ranked samples file
    pipeline    the stages in order (what the CLI calls)

Ranking never reads the run's verdicts, the hidden tests' outcomes or the original's outputs on the inputs
(the run keeps them beside the inputs, for pass+); only `metrics` reads the verdicts, after ranking, to say
what the top sample scored.
"""
