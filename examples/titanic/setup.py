"""Packages the trainer the way Vertex AI's pythonPackageSpec expects.

  /usr/bin/python3 setup.py sdist --formats=gztar
  -> dist/titanic-trainer-0.1.tar.gz (upload it to packageUris), or let
     `stoker jobs submit --package-path trainer` build and stage it.
"""

from setuptools import setup

setup(
    name='titanic-trainer',
    version='0.1',
    description='Titanic survival MLP, a Vertex AI style PyTorch trainer',
    packages=['trainer'],
    # torch and numpy come with the executor image (pytorch-cpu/-gpu).
    install_requires=[],
)
