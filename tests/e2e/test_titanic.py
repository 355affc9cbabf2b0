"""The flagship example end to end: data in a bucket, a packaged PyTorch
trainer, a Vertex job file, the model and metrics where Vertex puts them."""
import json
import os
import re
import subprocess

from harness import SOURCE, StokerTestCase, read_text


class TitanicTest(StokerTestCase):

    def test_titanic_trains_to_a_saved_model(self):
        example = os.path.join(SOURCE, "examples", "titanic")
        data = os.path.join(self.tmp, "titanic-data")
        subprocess.run(["/usr/bin/python3", os.path.join(example, "make_data.py"), "--out", data],
                       check=True, capture_output=True)
        self.stoker("storage", "cp", data, "gs://titanic/data")
        r = self.stoker("jobs", "submit", "--config", os.path.join(example, "job.yaml"),
                        "--package-path", os.path.join(example, "trainer"),
                        "--module-name", "trainer.task", "--args=--train=gs://titanic/data/train.npz,"
                        "--val=gs://titanic/data/val.npz,--epochs=5,--learning_rate=0.01",
                        "--follow", timeout=300)
        self.assertIn("JOB_STATE_SUCCEEDED", r.stdout)
        self.assertIn("epoch 5/5", r.stdout)
        acc = float(re.search(r"final val_acc=([0-9.]+)", r.stdout).group(1))
        self.assertGreater(acc, 0.7)
        model_dir = os.path.join(self.data, "buckets", "titanic", "output", "model")
        self.assertTrue(os.listdir(model_dir))
        job_id = re.search(r"Submitted job (\d+)", r.stdout).group(1)
        metrics = read_text(os.path.join(self.replica_dir(job_id), "hypertune", "output.metrics")).splitlines()
        self.assertEqual(len(metrics), 5)
        self.assertEqual(json.loads(metrics[-1])["global_step"], "5")
        self.assertIn("accuracy", json.loads(metrics[-1]))
        # The model is readable through the storage API too.
        listing = self.stoker("storage", "ls", "gs://titanic/output/model").stdout
        self.assertIn("gs://titanic/output/model/", listing)
