// Every fuzz target, registered by importing it.
import './live';
import './p4';
