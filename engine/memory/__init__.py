"""WorldNodes memory: conversations routed into topic worlds with belief graphs."""
from engine.memory.digest import BeliefNews, Digest, MergeNews, Supersession, WorldNews
from engine.memory.engine import MemoryEngine
from engine.memory.models import AskResult, Belief, Evidence, MemoryMessage, RecallResult, RouteResult, WorldInfo

__all__ = ["MemoryEngine", "Digest", "WorldNews", "BeliefNews", "Supersession", "MergeNews", "MemoryMessage",
           "AskResult", "Belief", "Evidence", "RecallResult", "RouteResult", "WorldInfo"]
