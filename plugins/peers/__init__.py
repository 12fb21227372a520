"""The loaders users would pick instead of dl's, as dl loader plugins, so `dl run --loader map,pool,lerobot,...`
measures them under one harness (`dl.contracts.loader.Peer`): `lerobot` (LeRobotDataset), `lerobot_stream`
(`--loader lerobot-stream`: StreamingLeRobotDataset), `lance` (lerobot-lancedb's LanceDBDataset), `ray` (Ray Data's
read_lerobot) and `daft` (Daft's LeRobot reader). Each imports its library only in the run's process, which the host
starts in the library's environment (`dl.contracts.loader.RunsInOwnEnvironment`, `environments`)."""

from dl.contracts.hookspecs import hookimpl

from .daft import DaftPeer
from .lance import LancePeer
from .lerobot import LeRobotPeer, LeRobotStreamPeer
from .ray import RayPeer


@hookimpl
def register_loaders(register):
    register("lerobot", LeRobotPeer, "peer: LeRobot's LeRobotDataset, shuffled as lerobot-train reads it")
    register("lerobot_stream", LeRobotStreamPeer, "peer: LeRobot's StreamingLeRobotDataset (shuffle buffer)")
    register("lance", LancePeer, "peer: lerobot-lancedb's LanceDBDataset over a Lance copy in dl's cache")
    register("ray", RayPeer, "peer: Ray Data's read_lerobot, iter_torch_batches with a local shuffle buffer")
    register("daft", DaftPeer, "peer: Daft's LeRobot reader, a sequential pass")
