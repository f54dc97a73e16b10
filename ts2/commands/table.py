"""The table of ``ts2`` commands: name -> :class:`Command` (config, lazy handler, help, examples).

Its own module so that the command line (:mod:`ts2.cli`) and the config checks
(:mod:`ts2.config_check`, which names the command a misplaced key belongs to) both read it
without importing each other. Each target is a ``"module:function"`` string, imported only when
its command runs.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ALIASES", "COMMANDS", "Command", "register_command"]


@dataclass(frozen=True)
class Command:
    config: str  # primary config name in conf/
    target: str  # "module:function", called with the composed DictConfig
    help: str
    actions: tuple[str, ...] = ()  # sub-commands passed as action=<name>
    examples: tuple[str, ...] = ()  # shown by `ts2 COMMAND --help`
    writes_folder: bool = False  # writes a result set into output_dir: one writer at a time (a lock)
    aliases: tuple[str, ...] = ()  # other names accepted on the command line (e.g. British spelling)


COMMANDS: dict[str, Command] = {}
ALIASES: dict[str, str] = {}  # alias -> command name


def register_command(name: str, command: Command) -> None:
    taken = [n for n in (name, *command.aliases) if n in COMMANDS or n in ALIASES]
    if taken:
        raise ValueError(f"command name(s) {taken} already registered")
    COMMANDS[name] = command
    ALIASES.update(dict.fromkeys(command.aliases, name))


# Built-in commands. Each target is imported only when its command runs.
for _name, _cmd in {
    "data": Command("data", "ts2.commands.data:main", "dataset tools",
                    ("info", "validate", "make-synthetic", "from-labels"),
                    ("ts2 data info path=PATH/TO/ts2", "ts2 data validate path=my_segs.yaml check_images=true",
                     "ts2 data make-synthetic out=DIR n_segs=10",
                     "ts2 data from-labels format=evalmuse labels=train_list.json images=DIR out=OUT")),
    "score": Command("score", "ts2.commands.score:main", "score a dataset's images with metrics", (),
                     ("ts2 score dataset=mini metric=geneval_shapes",
                      "ts2 score path=PATH/TO/ts2 metric=clipscore +metric@metrics.sig=siglip device=cuda"),
                     writes_folder=True),
    "cache": Command("cache", "ts2.commands.cache:main", "manage the score cache", ("info", "clear"),
                     ("ts2 cache info", "ts2 cache clear name=clipscore")),
    "analyze": Command("analyze", "ts2.commands.analyze:main", "TS2 meta-metrics of a score table", (),
                       ("ts2 analyze scores=outputs/score/X/scores.csv dataset=mini",
                        "ts2 analyze scores=scores.csv path=PATH/TO/ts2 protocol=graph compare=[a,b]"),
                       writes_folder=True, aliases=("analyse",)),
    "report": Command("report", "ts2.commands.report:main", "merge results into one report", (),
                      ("ts2 report results=outputs/run/X",
                       "ts2 report results=[outputs/score/a,outputs/score/b] figures=[pareto] title='My metrics'"),
                      writes_folder=True),
    "explore": Command("explore", "ts2.commands.explore:main", "interactive SEG explorer: where a metric fails", (),
                       ("ts2 explore results=outputs/run/X",
                        "ts2 explore results=outputs/analyze/X path=PATH/TO/ts2 metrics=[clipscore,blip1_tifa] "
                        "out=explorer.html"),
                       writes_folder=True),
    "run": Command("run", "ts2.commands.run:main", "score, analyse and report in one go", (),
                   ("ts2 run", "ts2 run path=PATH/TO/ts2 metric=clipscore figures=[pareto] bootstrap=200"),
                   writes_folder=True),
    "reproduce": Command("reproduce", "ts2.commands.reproduce:main", "the paper's Table 2 in both protocols", (),
                         ("ts2 reproduce", "ts2 reproduce path=PATH/TO/ts2 bootstrap=0"),
                         writes_folder=True),
    "questions": Command("questions", "ts2.commands.questions:main", "question generation for TIFA/DSG",
                         ("generate",),
                         ("ts2 questions generate qa_lm=hf qa_lm.model=DIR out=tifa_questions.csv",
                          "ts2 questions generate style=dsg qa_lm=openai qa_lm.model=gpt-4o-mini limit=10")),
}.items():
    register_command(_name, _cmd)
