"""The build step pyproject.toml cannot say: the wheel carries the app's files, not only its
packages, so that an installed `tinygpt-app` serves the app on the shipped model.

    repository                 in the wheel (and so in site-packages)
    app.py, pages/*.py         tinygpt_app/_app/app.py, tinygpt_app/_app/pages/
    models/*.npz, *.card.json  tinygpt_app/_app/models/
    .streamlit/config.toml     tinygpt_app/_app/.streamlit/config.toml
    lessons/*.toml             tinygpt_app/_app/lessons/ (the shipped lesson files)
    data/*                     tinygpt/_data/ (the training corpus: tinygpt.train.corpus)

The packages themselves (tinygpt, tinygpt_app and tinygpt_hosting, the hosting wing that serves
a class) are found by pyproject.toml's [tool.setuptools.packages.find].

tinygpt_app.settings.ROOT and tinygpt.train.corpus.DATA_DIR look there first, then in the
repository. An editable install (pip install -e .) copies nothing: it runs from the repository.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent

SHIPPED = [  # (files of the repository, the folder they go to in the wheel, keeping their path
    # relative to `base`)
    (["app.py", "pages/*.py", "models/*.npz", "models/*.card.json", ".streamlit/config.toml",
      "lessons/*.toml"], "tinygpt_app/_app", "."),
    (["data/*.gz", "data/*.json", "data/*.md"], "tinygpt/_data", "data"),
]


class BuildWithAppFiles(build_py):
    """build_py, then the app's files copied beside the packages (see the table above)."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install runs from the repository itself
        for patterns, folder, base in SHIPPED:
            for pattern in patterns:
                for source in sorted(HERE.glob(pattern)):
                    target = Path(self.build_lib, folder, source.relative_to(HERE / base))
                    self.mkpath(str(target.parent))
                    self.copy_file(str(source), str(target))


setup(cmdclass={"build_py": BuildWithAppFiles})
