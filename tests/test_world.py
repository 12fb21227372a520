"""dl.dataloader.world.resolve_ranks: one resolver for rank and world size (arguments, torch.distributed, accelerate,
RANK/WORLD_SIZE, SLURM), in that order."""

import pytest

from dl.contracts.errors import DlError
from dl.dataloader.world import Ranks, World, resolve_ranks

ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


def test_default_is_one_process():
    assert resolve_ranks() == Ranks(0, 1, 0, "default")


def test_arguments_win(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert resolve_ranks(2, 3) == Ranks(2, 3, 2, "arguments")


def test_torchrun_environment(monkeypatch):
    monkeypatch.setenv("RANK", "5")
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert resolve_ranks() == Ranks(5, 8, 1, "env")


def test_slurm_environment(monkeypatch):
    monkeypatch.setenv("SLURM_PROCID", "3")
    monkeypatch.setenv("SLURM_NTASKS", "4")
    monkeypatch.setenv("SLURM_LOCALID", "1")
    assert resolve_ranks() == Ranks(3, 4, 1, "slurm")


def test_torchrun_inside_a_slurm_job_uses_torchrun(monkeypatch):
    monkeypatch.setenv("SLURM_PROCID", "0")
    monkeypatch.setenv("SLURM_NTASKS", "1")  # one sbatch task that runs torchrun with 4 processes
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert resolve_ranks().source == "env" and resolve_ranks().world_size == 4


@pytest.mark.parametrize(("args", "env", "message"), [
    ((1, None), {}, "give both rank and world_size"),
    ((3, 3), {}, r"rank 3 is outside \[0, world_size=3\) \(from arguments\)"),
    ((None, None), {"RANK": "x", "WORLD_SIZE": "2"}, "RANK='x' is not an integer"),
    ((None, None), {"SLURM_PROCID": "4", "SLURM_NTASKS": "4"}, r"outside \[0, world_size=4\) \(from slurm\)"),
])
def test_errors(monkeypatch, args, env, message):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(DlError, match=message):
        resolve_ranks(*args)


def test_consumers_are_rank_major():
    worlds = [World(r, 2, w, 3) for r in range(2) for w in range(3)]
    assert [w.consumer for w in worlds] == list(range(6)) and {w.num_consumers for w in worlds} == {6}
