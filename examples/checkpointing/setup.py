"""Packages the trainer the way Vertex AI's pythonPackageSpec expects.

  /usr/bin/python3 setup.py sdist --formats=gztar
  -> dist/checkpointing-trainer-0.1.tar.gz (upload it to packageUris), or let
     `stoker jobs submit --package-path trainer` build and stage it.
"""

from setuptools import setup

setup(
    name='checkpointing-trainer',
    version='0.1',
    description='A PyTorch trainer that checkpoints and resumes bit for bit after preemption',
    packages=['trainer'],
    # torch and numpy come with the executor image (pytorch-cpu/-gpu).
    install_requires=[],
)
