"""The peer's models: torchvision's architectures, plus the TensorFlow
deep-MNIST LeNet that torchvision lacks, defined exactly like dlscale's."""
import torch
import torchvision.models as tv


class LeNet(torch.nn.Module):
    """2 × (5×5 SAME conv, ReLU, 2×2 max-pool), FC 1024 + dropout, classifier."""

    def __init__(self, image_size=28, num_classes=10):
        super().__init__()
        side = image_size // 4
        self.conv1 = torch.nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = torch.nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = torch.nn.Linear(side * side * 64, 1024)
        self.dropout = torch.nn.Dropout(0.5)
        self.fc2 = torch.nn.Linear(1024, num_classes)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        x = self.dropout(torch.relu(self.fc1(x.flatten(1))))
        return self.fc2(x)


def build_model(name, image_size, num_classes=None, aux_logits=False):
    """torchvision model `name` (untrained) or the LeNet above."""
    if name == "lenet":
        return LeNet(image_size, num_classes or 10)
    classes = num_classes or 1000
    if name == "googlenet":
        return tv.googlenet(weights=None, aux_logits=aux_logits, init_weights=True,
                            num_classes=classes)
    if name == "inception3":
        return tv.inception_v3(weights=None, aux_logits=aux_logits, init_weights=True,
                               num_classes=classes)
    ctor = {"alexnet": tv.alexnet, "vgg11": tv.vgg11, "vgg16": tv.vgg16, "vgg19": tv.vgg19,
            "resnet18": tv.resnet18, "resnet34": tv.resnet34, "resnet50": tv.resnet50,
            "resnet101": tv.resnet101, "resnet152": tv.resnet152}[name]
    return ctor(weights=None, num_classes=classes)
