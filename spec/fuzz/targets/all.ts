// Every fuzz target, registered by importing it.
import './live';
import './s3';
