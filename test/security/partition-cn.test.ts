import { describePartition } from './partition-suite.js';

describePartition('cn-north-1', 'aws-cn');
