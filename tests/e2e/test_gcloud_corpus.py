"""A corpus of gcloud command lines as public Vertex AI and AI Platform
tutorials and the gcloud reference print them, with `gcloud` replaced by
`stoker` and nothing else changed, run in order against a live daemon, each
with its expected exit code and output.

Each entry: (where it comes from, the command line, the exit code, a regular
expression the output (stdout and stderr together) must match). $NAMES are
filled from CORPUS_VARS and from what earlier lines printed (captures).
"""
import os
import re
import shlex

from harness import StokerTestCase, container_job

TRAINER = """import argparse, os, sys
p = argparse.ArgumentParser()
p.add_argument('--job-dir', default='')
p.add_argument('--epochs', type=int, default=1)
p.add_argument('--lr', type=float, default=0.1)
a, rest = p.parse_known_args()
print('trained', a.epochs, 'epochs; job dir', a.job_dir or os.environ.get('AIP_MODEL_DIR'))
try:
    import hypertune
    hypertune.HyperTune().report_hyperparameter_tuning_metric('accuracy', 1 - a.lr, a.epochs)
except ImportError:
    pass
sys.exit(int(os.environ.get('EXIT_CODE', '0')))
"""

# One pool, as a single mapping: the form of a widely copied Vertex tutorial.
POOL = """workerPoolSpecs:
  machineSpec:
    machineType: n1-standard-4
  replicaCount: 1
  pythonPackageSpec:
    executorImageUri: us-docker.pkg.dev/vertex-ai/training/pytorch-cpu.1-13:latest
    packageUris: [$PACKAGE_URI]
    pythonModule: trainer.task
"""

HP_CONFIG = """studySpec:
  metrics:
  - metricId: accuracy
    goal: MAXIMIZE
  parameters:
  - parameterId: lr
    doubleValueSpec: {minValue: 0.001, maxValue: 0.1}
    scaleType: UNIT_LOG_SCALE
trialJobSpec:
""" + "\n".join("  " + line for line in POOL.splitlines()) + "\n"

CUSTOM_CONFIG = POOL + "    args: [--epochs=3]\n"

CORPUS = [
    # Cloud ML Engine / AI Platform "getting started" (census): ml-engine and ai-platform groups.
    ("AI Platform docs, training quickstart",
     "ml-engine jobs submit training census_1 --job-dir gs://$BUCKET/census_1 "
     "--runtime-version 1.14 --module-name trainer.task --package-path trainer/ "
     "--region us-central1 -- --epochs 2",
     0, r"Job \[census_1\] submitted successfully"),
    ("AI Platform docs, monitoring training jobs", "ai-platform jobs stream-logs census_1",
     0, r"trained 2 epochs; job dir \S+/census_1"),  # gs:// paths reach trainers as files
    ("AI Platform docs, monitoring training jobs", "ai-platform jobs describe census_1",
     0, r"(?m)^state: SUCCEEDED"),
    ("gcloud reference, ai-platform jobs submit training",
     "ai-platform jobs submit training census_2 --scale-tier basic --package-path trainer/ "
     "--module-name trainer.task --region us-central1 --python-version 3.7 "
     "--runtime-version 2.1 --job-dir gs://$BUCKET/census_2 --stream-logs -- --epochs=1",
     0, r"trained 1 epochs"),
    ("gcloud reference: a failed job streams and exits non-zero",
     "ai-platform jobs submit training census_bad --package-path trainer/ "
     "--module-name trainer.task --region us-central1 --labels=team=ml --stream-logs "
     "-- --epochs=not-a-number",
     1, r"argument --epochs: invalid int value"),
    ("gcloud reference: lower-case accelerator names",
     "ai-platform jobs submit training gpu_1 --scale-tier custom --master-machine-type "
     "n1-standard-8 --master-accelerator count=2,type=nvidia-tesla-k80 --package-path trainer/ "
     "--module-name trainer.task --region us-central1",
     2, r"needs 2x NVIDIA_TESLA_K80"),
    ("gcloud reference: TPUs", "ai-platform jobs submit training tpu_1 --scale-tier custom "
     "--master-machine-type n1-standard-8 --master-accelerator count=8,type=tpu-v2 "
     "--package-path trainer/ --module-name trainer.task --region us-central1",
     2, r"--master-accelerator: TPUs are not supported"),
    ("AI Platform docs, listing jobs", "ai-platform jobs list --limit 2",
     0, r"census_bad[\s\S]*census_2"),

    # Vertex AI custom training.
    ("Vertex docs, create a custom job with autopackaging",
     "ai custom-jobs create --region=us-central1 --display-name=autopkg "
     "--worker-pool-spec=machine-type=n1-standard-4,replica-count=1,"
     "executor-image-uri=us-docker.pkg.dev/vertex-ai/training/pytorch-cpu.1-13:latest,"
     "local-package-path=trainer,script=task.py --args=--epochs=4",
     0, r"CustomJob \[(?P<CUSTOM_JOB>projects/\S+/customJobs/\d+)\] is submitted successfully"),
    ("Vertex docs, stream logs", "ai custom-jobs stream-logs $CUSTOM_JOB",
     0, r"trained 4 epochs"),
    ("Vertex docs, describe", "ai custom-jobs describe $CUSTOM_JOB --format=\"value(state)\"",
     0, r"^JOB_STATE_SUCCEEDED\n$"),
    ("Vertex tutorial: a config whose workerPoolSpecs is one mapping",
     "ai custom-jobs create --region=us-central1 --display-name=mapping --config=config.yaml",
     0, r"CustomJob \[(?P<MAPPING_JOB>projects/\S+/customJobs/\d+)\][\s\S]*"
        r"WARNING: workerPoolSpecs is one mapping; read as a list"),
    ("Vertex docs, stream logs", "ai custom-jobs stream-logs $MAPPING_JOB", 0, r"trained 3 epochs"),
    ("gcloud topic formats: a table of the newest jobs",
     "ai custom-jobs list --region=us-central1 --limit=1 "
     "--format=\"table(name.basename():label=ID,displayName,state)\"",
     0, r"^ID +DISPLAY_NAME +STATE\n\d+ +mapping +JOB_STATE_SUCCEEDED\n$"),
    ("gcloud topic filters", "ai custom-jobs list --filter=\"displayName:autopkg AND "
     "state=JOB_STATE_SUCCEEDED\" --format=\"value(displayName)\"",
     0, r"^autopkg\n$"),
    ("gcloud topic filters: ~ is a regular expression",
     "ai custom-jobs list --filter=\"displayName~^auto\" --format=json",
     0, r"^\[\n  \{[\s\S]*\"displayName\": \"autopkg\""),
    ("gcloud: --format after the command", "ai custom-jobs describe $MAPPING_JOB --format yaml",
     0, r"(?m)^displayName: mapping$"),
    ("Vertex docs, local-run",
     "ai custom-jobs local-run "
     "--executor-image-uri=us-docker.pkg.dev/vertex-ai/training/pytorch-cpu.1-13:latest "
     "--local-package-path=trainer --script=task.py -- --epochs=5 --job-dir=out",
     0, r"trained 5 epochs; job dir out"),

    # Vertex hyperparameter tuning.
    ("Vertex docs, create a hyperparameter tuning job",
     "ai hp-tuning-jobs create --region=us-central1 --display-name=hp-corpus --config=hp.yaml "
     "--max-trial-count=2 --parallel-trial-count=2",
     0, r"Submitted tuning job (?P<HP_JOB>\d+)"),
    ("gcloud reference, ai hp-tuning-jobs stream-logs", "ai hp-tuning-jobs stream-logs $HP_JOB "
     "--region=us-central1", 0, r"trained 1 epochs[\s\S]*trained 1 epochs[\s\S]*==> trial 1 [\s\S]*==> trial 2 "),
    ("gcloud reference, ai hp-tuning-jobs describe",
     "ai hp-tuning-jobs describe projects/p/locations/us-central1/hyperparameterTuningJobs/$HP_JOB"
     " --format=\"value(state,trials.len())\"",
     0, r"^JOB_STATE_SUCCEEDED\t2\n$"),
    ("gcloud reference, ai hp-tuning-jobs list",
     "ai hp-tuning-jobs list --region=us-central1 --format=\"csv(displayName,state)\"",
     0, r"^displayName,state\nhp-corpus,JOB_STATE_SUCCEEDED\n$"),

    # Stoker's own job commands take the same output flags.
    ("gcloud conventions on stoker's commands", "jobs describe $AUTOPKG_ID --format json",
     0, r"\"displayName\": \"autopkg\""),
    ("gcloud conventions on stoker's commands", "jobs list --sort-by=~displayName --limit=1 "
     "--format=\"value(displayName)\"", 0, r"^stage_only\n$"),

    # Mistakes get the fix.
    ("a typo in a command", "ai-platform jobs submt training x", 2,
     r"'submt' is not a command of 'stoker ai-platform jobs'; did you mean 'submit'\?"),
    ("a typo in a flag", "ai custom-jobs list --regoin=us-central1", 2,
     r"unrecognized argument '--regoin'.*did you mean '--region'\?"),
    ("a bad --format", "jobs list --format=jsn", 2, r"--format: unknown format 'jsn'.*did you mean json"),
]


class GcloudCorpusTest(StokerTestCase):

    def test_the_corpus(self):
        work = os.path.join(self.tmp, "work")
        os.makedirs(os.path.join(work, "trainer"))
        with open(os.path.join(work, "trainer", "__init__.py"), "w"):
            pass
        with open(os.path.join(work, "trainer", "task.py"), "w") as f:
            f.write(TRAINER)
        self.stoker("storage", "mb", "gs://corpus")
        # The tuning and mapping configs run the package staged by a first job.
        self.stoker("jobs", "submit", "training", "stage_only", "--package-path", "trainer/",
                    "--module-name", "trainer.task", cwd=work)
        package = self.api("GET", "/v1/projects/p/jobs/stage_only")[1]["trainingInput"]["packageUris"][0]
        variables = {"BUCKET": "corpus", "PACKAGE_URI": package}
        for name, text in (("hp.yaml", HP_CONFIG), ("config.yaml", CUSTOM_CONFIG)):
            with open(os.path.join(work, name), "w") as f:
                f.write(text.replace("$PACKAGE_URI", package))

        for source, line, want_rc, want in CORPUS:
            args = [re.sub(r"\$(\w+)", lambda m: variables[m.group(1)], a) for a in shlex.split(line)]
            with self.subTest(line=line, source=source):
                r = self.stoker(*args, check=False, cwd=work, timeout=180)
                out = r.stdout + r.stderr
                self.assertEqual(r.returncode, want_rc, "stoker %s\n%s" % (line, out))
                m = re.search(want, out if not want.startswith("^") else r.stdout)
                self.assertTrue(m, "stoker %s\nwanted %r in\n%s" % (line, want, out))
                variables.update({k: v for k, v in m.groupdict().items() if v})
                if "CUSTOM_JOB" in variables:
                    variables["AUTOPKG_ID"] = variables["CUSTOM_JOB"].rsplit("/", 1)[1]

    def test_local_run_maps_gs_arguments_to_the_local_buckets(self):
        # local-run reads the buckets of $STOKER_HOME (the local daemon's data
        # dir), as the user's own daemon would give them to a job.
        home = os.path.join(self.tmp, "home")
        os.makedirs(os.path.join(home, "buckets", "mine"))
        work = os.path.join(self.tmp, "lr")
        os.makedirs(work)
        with open(os.path.join(work, "task.py"), "w") as f:
            f.write(TRAINER.replace("import argparse, os, sys\n", "import argparse, os, sys\n"
                                    "print('at /gcs/mine:', sorted(os.listdir('/gcs/mine')))\n"))
        with open(os.path.join(home, "buckets", "mine", "data.csv"), "w") as f:
            f.write("x\n")
        r = self.stoker("ai", "custom-jobs", "local-run",
                        "--executor-image-uri=us-docker.pkg.dev/vertex-ai/training/pytorch-cpu.1-13:latest",
                        "--local-package-path=" + work, "--script=task.py", "--",
                        "--job-dir=gs://mine/out", "--lr=0.5", "gs://absent-bucket/x",
                        env={"STOKER_HOME": home}, timeout=180)
        out = r.stdout + r.stderr
        self.assertIn("trained 1 epochs; job dir %s/buckets/mine/out" % home, out)
        self.assertIn("local-run: --job-dir=gs://mine/out -> --job-dir=%s/buckets/mine/out" % home, out)
        self.assertNotIn("absent-bucket/x ->", out)  # a bucket that does not exist stays as written
        # The buckets at /gcs too, as in a job, where the host has /gcs (a root
        # daemon, such as this test's, makes it).
        if os.path.isdir("/gcs"):
            self.assertIn("at /gcs/mine: ['data.csv']", out)

    def test_local_run_takes_the_trainers_arguments_after_a_list_flag(self):
        # A list flag right before `--` once ended there, and the trainer's
        # arguments were read as the CLI's ("--epochs=5 was not expected").
        work = os.path.join(self.tmp, "lr2")
        os.makedirs(work)
        with open(os.path.join(work, "task.py"), "w") as f:
            f.write("import sys\nprint('trainer args', sys.argv[1:])\n")
        r = self.stoker("ai", "custom-jobs", "local-run",
                        "--executor-image-uri=us-docker.pkg.dev/vertex-ai/training/pytorch-cpu.1-13:latest",
                        "--local-package-path=" + work, "--script=task.py",
                        "--requirements=numpy", "--", "--epochs=5", "--lr", "0.1",
                        env={"STOKER_HOME": os.path.join(self.tmp, "home2")}, timeout=300)
        self.assertIn("trainer args ['--epochs=5', '--lr', '0.1']", r.stdout, r.stderr)

    def test_a_single_mapping_over_rest_is_read_with_a_warning_event(self):
        job = container_job("one-pool", "echo ran")
        job["jobSpec"]["workerPoolSpecs"] = job["jobSpec"]["workerPoolSpecs"][0]
        job_id = self.submit(job)
        self.assertEqual(self.wait_state(job_id)["state"], "JOB_STATE_SUCCEEDED")
        _, stored = self.api("GET", self.project_path + "/" + job_id)
        self.assertIsInstance(stored["jobSpec"]["workerPoolSpecs"], list)
        text = self.stoker("jobs", "describe", job_id).stdout
        self.assertIn("warning: jobSpec.workerPoolSpecs is one mapping; read as a list", text)


if __name__ == "__main__":
    import unittest
    unittest.main()
